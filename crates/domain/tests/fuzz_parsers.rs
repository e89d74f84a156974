//! Property-based fuzzing of the domain's parsers of untrusted input: API
//! keys (`api_key`) and search queries (`search`). They run as ordinary
//! tests; each keeps to a few seconds in a debug build.
//!
//! Every property checks what the parser promises, not only that it returns:
//! API keys are compared with an independent model of the format, and the
//! search compiler's FTS5 and tsquery strings are parsed back with a strict
//! grammar of what the compiler may emit.

use parley_domain::Mode;
use parley_domain::api_key::{ApiKey, hash_key};
use parley_domain::search::{self, Query, QueryError, Term};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config(cases: u32) -> Config {
    Config { cases, ..Config::default() }
}

// ---------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------

const BASE62: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The documented format, written independently of `api_key.rs`:
/// `parley_<live|test>_`, 30 base62 characters, then the CRC32 of those 30
/// as 6 base62 digits, most significant first.
fn model_checksum(random: &str) -> String {
    let mut n = crc32fast::hash(random.as_bytes());
    let mut digits = Vec::new();
    for _ in 0..6 {
        digits.push(BASE62.as_bytes()[(n % 62) as usize] as char);
        n /= 62;
    }
    digits.iter().rev().collect()
}

fn model_parse(raw: &str) -> Option<Mode> {
    let (mode, secret) = if let Some(s) = raw.strip_prefix("parley_live_") {
        (Mode::Live, s)
    } else if let Some(s) = raw.strip_prefix("parley_test_") {
        (Mode::Test, s)
    } else {
        return None;
    };
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() != 36 || !chars.iter().all(|c| BASE62.contains(*c)) {
        return None;
    }
    let random: String = chars[..30].iter().collect();
    let check: String = chars[30..].iter().collect();
    (model_checksum(&random) == check).then_some(mode)
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Live), Just(Mode::Test)]
}

fn base62_char() -> impl Strategy<Value = char> {
    proptest::sample::select(BASE62.chars().collect::<Vec<_>>())
}

/// A valid key built from an arbitrary random part (not only `generate`'s).
fn model_key() -> impl Strategy<Value = String> {
    (mode(), proptest::collection::vec(base62_char(), 30)).prop_map(|(mode, random)| {
        let random: String = random.into_iter().collect();
        format!("parley_{}_{random}{}", mode.as_str(), model_checksum(&random))
    })
}

/// Characters a mutation may put into a key: every base62 character, the
/// separator, look-alikes and multi-byte characters (which change the byte
/// length without changing the character count).
fn mutation_alphabet() -> Vec<char> {
    let mut chars: Vec<char> = BASE62.chars().collect();
    chars
        .extend(['_', '-', ' ', '\0', '\n', '.', '+', '/', '=', 'é', 'ß', '€', '０', 'Ａ', 'ı', 'K', '😀', '\u{feff}']);
    chars
}

/// A character near the key alphabet most of the time, anything otherwise.
fn key_char() -> impl Strategy<Value = char> {
    prop_oneof![
        8 => base62_char(),
        1 => Just('_'),
        1 => proptest::sample::select(mutation_alphabet()),
        1 => any::<char>(),
    ]
}

/// Strings around the key prefixes: right and wrong prefixes, bodies of
/// about the right length, sometimes with a correct checksum appended.
fn near_key() -> impl Strategy<Value = String> {
    let prefix = proptest::sample::select(vec![
        "parley_live_",
        "parley_test_",
        "parley_",
        "parley_prod_",
        "parley_live",
        "parley__live_",
        "Parley_live_",
        "parley_LIVE_",
        "parley_live__",
        "",
    ]);
    let body = prop_oneof![
        proptest::collection::vec(key_char(), 28..40).prop_map(|cs| cs.into_iter().collect::<String>()),
        // 30 characters and their correct checksum, then possibly more.
        (proptest::collection::vec(base62_char(), 30), proptest::collection::vec(key_char(), 0..3)).prop_map(
            |(random, tail)| {
                let random: String = random.into_iter().collect();
                let tail: String = tail.into_iter().collect();
                format!("{random}{}{tail}", model_checksum(&random))
            }
        ),
        // Exactly 36 bytes, one of them part of a multi-byte character: the
        // byte length is right but the characters are not.
        (proptest::collection::vec(base62_char(), 36), proptest::sample::select(vec!['é', '€', '😀']), 0usize..36)
            .prop_map(|(cs, wide, at)| {
                let mut s: String = cs.into_iter().collect();
                let at = at.min(36 - wide.len_utf8());
                s.replace_range(at..at + wide.len_utf8(), &wide.to_string());
                s
            }),
    ];
    (prefix, body).prop_map(|(p, b)| format!("{p}{b}"))
}

/// `parse` agrees with the model (so it never panics, and never accepts or
/// refuses what the format does not say), keeping the text as presented.
fn check_parse_matches_model(raw: &str) -> Result<(), TestCaseError> {
    let parsed = ApiKey::parse(raw);
    prop_assert_eq!(parsed.as_ref().map(ApiKey::mode), model_parse(raw), "{:?}", raw);
    if let Some(key) = parsed {
        prop_assert_eq!(key.expose(), raw);
        prop_assert_eq!(key.hash(), hash_key(raw));
    }
    Ok(())
}

/// Every way to change one character of `key`: substitutions by each
/// character of `alphabet` (other than the one there), deletions, and
/// insertions of each character of `alphabet` at every position.
fn single_character_mutations(key: &str, alphabet: &[char]) -> Vec<(String, String)> {
    let chars: Vec<char> = key.chars().collect();
    let mut out = Vec::new();
    for i in 0..=chars.len() {
        for &c in alphabet {
            let mut m = chars.clone();
            m.insert(i, c);
            out.push((format!("insert {c:?} at {i}"), m.into_iter().collect()));
        }
        if i == chars.len() {
            break;
        }
        let mut m = chars.clone();
        m.remove(i);
        out.push((format!("delete at {i}"), m.into_iter().collect()));
        for &c in alphabet.iter().filter(|&&c| c != chars[i]) {
            let mut m = chars.clone();
            m[i] = c;
            out.push((format!("substitute {c:?} at {i}"), m.into_iter().collect()));
        }
    }
    out
}

proptest! {
    #![proptest_config(config(10_000))]

    #[test]
    fn api_key_parse_agrees_with_the_format_on_arbitrary_strings(raw in any::<String>()) {
        check_parse_matches_model(&raw)?;
    }

    #[test]
    fn api_key_parse_agrees_with_the_format_near_the_prefixes(raw in near_key()) {
        check_parse_matches_model(&raw)?;
    }

    #[test]
    fn api_key_any_valid_key_parses(raw in model_key()) {
        let key = ApiKey::parse(&raw);
        prop_assert!(key.is_some(), "{raw}");
        check_parse_matches_model(&raw)?;
    }

    #[test]
    fn api_key_generated_keys_round_trip(mode in mode()) {
        let key = ApiKey::generate(mode);
        let text = key.expose();
        prop_assert_eq!(model_parse(text), Some(mode), "{}", text);
        let parsed = ApiKey::parse(text);
        prop_assert_eq!(parsed.as_ref().map(ApiKey::mode), Some(mode));
        prop_assert_eq!(parsed.as_ref().map(ApiKey::expose), Some(text));
        prop_assert!(parsed.as_ref() == Some(&key));
        prop_assert_eq!(parsed.map(|k| k.hash()), Some(key.hash()));
    }

    /// The hint is the prefix and the last four characters (of the
    /// checksum): none of the 30 random characters, and `Debug` shows none
    /// of the secret.
    #[test]
    fn api_key_hint_and_debug_hide_the_secret(raw in model_key()) {
        let key = ApiKey::parse(&raw).expect("a valid key");
        let prefix = format!("parley_{}_", key.mode().as_str());
        let secret = &raw[prefix.len()..];
        prop_assert_eq!(key.hint(), format!("{prefix}…{}", &secret[32..]));
        prop_assert!(!key.hint().contains(&secret[..32]));
        prop_assert_eq!(format!("{key:?}"), format!("ApiKey({}, ***)", key.mode().as_str()));
    }

    /// One arbitrary character (any Unicode scalar) substituted, deleted or
    /// inserted anywhere.
    #[test]
    fn api_key_a_random_single_character_mutation_is_rejected(
        raw in model_key(),
        at in 0usize..64,
        c in prop_oneof![key_char(), any::<char>()],
        kind in 0u8..3,
    ) {
        let mut chars: Vec<char> = raw.chars().collect();
        let at = at % (chars.len() + usize::from(kind == 2));
        match kind {
            0 if chars[at] == c => return Ok(()), // not a change
            0 => chars[at] = c,
            1 => {
                chars.remove(at);
            }
            _ => chars.insert(at, c),
        }
        let mutated: String = chars.into_iter().collect();
        prop_assert!(ApiKey::parse(&mutated).is_none(), "{raw} -> {mutated} was accepted");
    }

    /// Swapping two different adjacent characters anywhere except across
    /// the boundary between the random part and the checksum (where a
    /// collision is possible in principle, with odds of about 2^-32).
    #[test]
    fn api_key_an_adjacent_transposition_is_rejected(raw in model_key(), at in 0usize..46) {
        let mut chars: Vec<char> = raw.chars().collect();
        // Characters 41 and 42 are the last random one and the first of the checksum.
        let at = if at >= 41 { at + 1 } else { at };
        if chars[at] == chars[at + 1] {
            return Ok(()); // not a change
        }
        chars.swap(at, at + 1);
        let mutated: String = chars.into_iter().collect();
        prop_assert!(ApiKey::parse(&mutated).is_none(), "{raw} -> {mutated} was accepted");
    }
}

proptest! {
    #![proptest_config(config(400))]

    /// Every single-character mutation, enumerated: each position, each
    /// character of the mutation alphabet (all of base62 included).
    #[test]
    fn api_key_every_single_character_mutation_is_rejected(raw in model_key()) {
        for (what, mutated) in single_character_mutations(&raw, &mutation_alphabet()) {
            prop_assert!(ApiKey::parse(&mutated).is_none(), "{raw}: {what} gives {mutated}, which was accepted");
        }
    }
}

// ---------------------------------------------------------------------------
// Search queries
// ---------------------------------------------------------------------------

/// Characters a query or a text may contain, weighted towards the syntax
/// and towards what FTS5, tsquery and HTML treat specially: letters and
/// digits 6/16, the query syntax 4/16, other ASCII punctuation and controls
/// 2/16, letters, digits and marks beyond ASCII 2/16 (among them forms that
/// fold, combining marks and alphanumerics that are not letters), and any
/// code point 2/16. One integer per character: `prop_oneof!` over `select`s
/// and `any::<char>()` is ten times slower in a debug build.
fn query_char() -> impl Strategy<Value = char> {
    const WORD: &[char] = &['a', 'b', 'c', 'X', 'Y', 'Z', '0', '1', '9'];
    const SYNTAX: &[char] = &[' ', '"', '-', '*'];
    const ASCII: &str = "'\\:()&|!<>^+.,;#@{}[]=~%$_/?\t\n\r\0\u{7}\u{1b}\u{7f}";
    const WIDE: &str = "éÉßẞİıΩ中ж٣²½Ⅻ𝔘ﬁǅ😀…\u{301}\u{345}\u{903}\u{85}\u{a0}\u{2028}\u{3000}\u{feff}\u{200b}";
    any::<u32>().prop_map(|x| {
        let pick = |chars: &[char]| chars[(x / 16) as usize % chars.len()];
        match x % 16 {
            0..=5 => pick(WORD),
            6..=9 => pick(SYNTAX),
            10..=11 => pick(&ASCII.chars().collect::<Vec<_>>()),
            12..=13 => pick(&WIDE.chars().collect::<Vec<_>>()),
            _ => char::from_u32((x / 16) % 0x11_0000).unwrap_or('\u{fffd}'),
        }
    })
}

fn query_text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(query_char(), 0..max).prop_map(|cs| cs.into_iter().collect())
}

fn is_word(w: &str) -> bool {
    !w.is_empty() && w.chars().all(char::is_alphanumeric)
}

/// Reads a `to_fts5` string back: `"w w…"[ *]` terms joined by ` AND `,
/// then ` NOT "…"` terms, words of letters and digits only. Anything else
/// the compiler emitted is an error.
fn read_fts5(s: &str) -> Result<Query, String> {
    fn term(s: &str) -> Result<(Term, &str), String> {
        let inner = s.strip_prefix('"').ok_or_else(|| format!("expected a quote at {s:?}"))?;
        let end = inner.find('"').ok_or_else(|| format!("unclosed quote at {s:?}"))?;
        let words: Vec<String> = inner[..end].split(' ').map(str::to_owned).collect();
        if !words.iter().all(|w| is_word(w)) {
            return Err(format!("a quoted phrase holds more than words: {:?}", &inner[..end]));
        }
        let rest = &inner[end + 1..];
        match rest.strip_prefix(" *") {
            Some(rest) => Ok((Term::Phrase { words, prefix: true }, rest)),
            None => Ok((Term::Phrase { words, prefix: false }, rest)),
        }
    }
    let (first, mut rest) = term(s)?;
    let mut include = vec![first];
    while let Some(r) = rest.strip_prefix(" AND ") {
        let (t, r) = term(r)?;
        include.push(t);
        rest = r;
    }
    let mut exclude = Vec::new();
    while let Some(r) = rest.strip_prefix(" NOT ") {
        let (t, r) = term(r)?;
        exclude.push(t);
        rest = r;
    }
    if !rest.is_empty() {
        return Err(format!("unexpected {rest:?}"));
    }
    Ok(Query { include, exclude })
}

/// Reads a `to_tsquery` string back: `('w' <-> 'w'[:*])` terms joined by
/// ` & `, excluded ones as ` & !(…)`, `:*` only on a term's last lexeme.
fn read_tsquery(s: &str) -> Result<Query, String> {
    fn term(s: &str) -> Result<(Term, &str), String> {
        let mut rest = s.strip_prefix('(').ok_or_else(|| format!("expected ( at {s:?}"))?;
        let mut words = Vec::new();
        loop {
            let inner = rest.strip_prefix('\'').ok_or_else(|| format!("expected a quote at {rest:?}"))?;
            let end = inner.find('\'').ok_or_else(|| format!("unclosed quote at {rest:?}"))?;
            if !is_word(&inner[..end]) {
                return Err(format!("a lexeme holds more than a word: {:?}", &inner[..end]));
            }
            words.push(inner[..end].to_owned());
            rest = &inner[end + 1..];
            let prefix = match rest.strip_prefix(":*") {
                Some(r) => {
                    rest = r;
                    true
                }
                None => false,
            };
            if let Some(r) = rest.strip_prefix(')') {
                return Ok((Term::Phrase { words, prefix }, r));
            }
            if prefix {
                return Err(format!(":* before the last lexeme in {s:?}"));
            }
            rest = rest.strip_prefix(" <-> ").ok_or_else(|| format!("expected <-> at {rest:?}"))?;
        }
    }
    let (first, mut rest) = term(s)?;
    let mut include = vec![first];
    let mut exclude = Vec::new();
    while let Some(r) = rest.strip_prefix(" & ") {
        rest = match r.strip_prefix('!') {
            Some(r) => {
                let (t, r) = term(r)?;
                exclude.push(t);
                r
            }
            None if exclude.is_empty() => {
                let (t, r) = term(r)?;
                include.push(t);
                r
            }
            None => return Err(format!("an included term after an excluded one in {s:?}")),
        };
    }
    if !rest.is_empty() {
        return Err(format!("unexpected {rest:?}"));
    }
    Ok(Query { include, exclude })
}

/// What a parsed query and its compiled forms must satisfy.
fn check_query(q: &Query) -> Result<(), TestCaseError> {
    prop_assert!(!q.include.is_empty());
    for Term::Phrase { words, .. } in q.include.iter().chain(&q.exclude) {
        prop_assert!(!words.is_empty());
        for w in words {
            prop_assert!(is_word(w), "{:?}", w);
            prop_assert_eq!(&search::fold(w), w, "words are folded");
        }
    }
    let fts5 = q.to_fts5();
    // The alphabet: letters and digits (inside quotes, and the operators
    // AND and NOT), the quotes themselves, spaces and the prefix `*`.
    prop_assert!(fts5.chars().all(|c| c.is_alphanumeric() || matches!(c, '"' | ' ' | '*')), "{}", fts5);
    prop_assert_eq!(read_fts5(&fts5).map_err(TestCaseError::fail)?, q.clone(), "{}", fts5);
    let tsquery = q.to_tsquery();
    prop_assert!(tsquery.chars().all(|c| c.is_alphanumeric() || "'() <->:*&!".contains(c)), "{}", tsquery);
    prop_assert_eq!(read_tsquery(&tsquery).map_err(TestCaseError::fail)?, q.clone(), "{}", tsquery);
    Ok(())
}

/// Undoes `escape`, refusing any `&` that is not one of its entities.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let (entity, c) = [("&lt;", '<'), ("&gt;", '>'), ("&amp;", '&'), ("&quot;", '"'), ("&#39;", '\'')]
            .into_iter()
            .find(|(e, _)| rest.starts_with(e))
            .ok_or_else(|| format!("a bare & at {rest:?}"))?;
        out.push(c);
        rest = &rest[entity.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Checks one snippet of `text` and returns how many words it marked.
fn check_snippet(text: &str, q: &Query, width: usize) -> Result<usize, TestCaseError> {
    let out = search::snippet(text, q, width);
    // Split into the text between tags and the marked words, checking the
    // tags alternate and never nest.
    let mut plain = String::new();
    let mut marks = 0;
    let mut rest = out.as_str();
    while let Some(open) = rest.find("<mark>") {
        let between = &rest[..open];
        prop_assert!(!between.contains("</mark>"), "a closing tag without an opening one: {}", out);
        plain.push_str(&unescape(between).map_err(TestCaseError::fail)?);
        let after = &rest[open + "<mark>".len()..];
        let close = after.find("</mark>").ok_or_else(|| TestCaseError::fail(format!("unclosed <mark>: {out}")))?;
        let marked = &after[..close];
        prop_assert!(!marked.contains("<mark>"), "nested marks: {}", out);
        let word = unescape(marked).map_err(TestCaseError::fail)?;
        prop_assert!(is_word(&word), "a mark around more than a word: {:?} in {}", word, out);
        plain.push_str(&word);
        marks += 1;
        rest = &after[close + "</mark>".len()..];
    }
    prop_assert!(!rest.contains("</mark>"), "a closing tag without an opening one: {}", out);
    plain.push_str(&unescape(rest).map_err(TestCaseError::fail)?);
    // HTML-safe: outside the tags, nothing that HTML would read as markup.
    let stripped = out.replace("<mark>", "").replace("</mark>", "");
    prop_assert!(!stripped.contains(['<', '>', '"', '\'']), "{}", out);
    // The visible text is a window of `text` of min(width, length)
    // characters, with `…` where it was cut.
    let chars: Vec<char> = text.chars().collect();
    let n = width.min(chars.len());
    let visible: Vec<char> = plain.chars().collect();
    prop_assert!(
        visible.len() >= n && visible.len() <= n + 2,
        "{} characters for a window of {}: {}",
        visible.len(),
        n,
        out
    );
    // Which windows `visible` can be: `…` before exactly when the window
    // does not start the text, `…` after exactly when it does not end it.
    let fits = (0..=chars.len() - n).any(|from| {
        let (lead, trail) = (usize::from(from > 0), usize::from(from + n < chars.len()));
        lead + n + trail == visible.len()
            && visible[..lead].iter().all(|&c| c == '…')
            && visible[lead + n..].iter().all(|&c| c == '…')
            && visible[lead..lead + n] == chars[from..from + n]
    });
    prop_assert!(fits, "{:?} is not a window of {:?}", plain, text);
    // Bounded: each character escapes to at most 6, each mark adds 13, and
    // marks are words, so at most one per two characters.
    prop_assert!(marks <= n.div_ceil(2));
    prop_assert!(out.chars().count() <= 6 * n + 13 * marks + 2, "{}", out);
    Ok(marks)
}

/// A character that is neither a letter, a digit, a quote nor `*`.
fn unsearchable_char() -> impl Strategy<Value = char> {
    prop_oneof![query_char(), any::<char>()]
        .prop_map(|c| if c.is_alphanumeric() || matches!(c, '"' | '*') { '#' } else { c })
}

/// Upper case where that is one character (`ß` would become `SS`).
fn upper(w: &str) -> String {
    w.chars()
        .map(|c| {
            let mut u = c.to_uppercase();
            match (u.next(), u.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

fn folded_word() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select("abcdefxyz0189éüß中ж".chars().collect::<Vec<_>>()), 1..6)
        .prop_map(|cs| search::fold(&cs.into_iter().collect::<String>()))
}

/// A query as a list of terms (words, phrase, negated, prefix) written out
/// with random spacing and case, and the query it must parse to; with
/// `all_negated`, every term is an exclusion.
fn structured_query(all_negated: bool) -> impl Strategy<Value = (String, Result<Query, QueryError>)> {
    let negated = if all_negated { Just(true).boxed() } else { any::<bool>().boxed() };
    let term = (
        proptest::collection::vec(folded_word(), 1..4),
        any::<bool>(), // quoted
        negated,
        any::<bool>(), // prefix (unquoted only)
        proptest::sample::select(vec!["#", ".", ",", "'", ":", "(", ")", "&", "|", "/", "-"]),
        any::<bool>(), // upper case
    );
    (
        proptest::collection::vec(term, 1..6),
        proptest::collection::vec(proptest::sample::select(vec![" ", "  ", "\t", "\n", "\u{a0}", "\u{3000}"]), 6),
    )
        .prop_map(|(terms, gaps)| {
            let mut text = String::from(gaps[0]);
            let (mut include, mut exclude) = (Vec::new(), Vec::new());
            for (i, (words, quoted, negated, prefix, joiner, upper)) in terms.into_iter().enumerate() {
                if i > 0 {
                    text.push_str(gaps[i]);
                }
                let shown: Vec<String> = words.iter().map(|w| if upper { self::upper(w) } else { w.clone() }).collect();
                if negated {
                    text.push('-');
                }
                let prefix = prefix && !quoted;
                if quoted {
                    text.push('"');
                    text.push_str(&shown.join(" "));
                    text.push('"');
                } else {
                    // A leading `-` would read as a negation.
                    let joiner = if joiner == "-" && !negated { "#" } else { joiner };
                    text.push_str(&shown.join(joiner));
                    if prefix {
                        text.push('*');
                    }
                }
                let term = Term::Phrase { words, prefix };
                if negated { exclude.push(term) } else { include.push(term) }
            }
            text.push_str(gaps[5]);
            let expected =
                if include.is_empty() { Err(QueryError::OnlyExclusions) } else { Ok(Query { include, exclude }) };
            (text, expected)
        })
}

proptest! {
    #![proptest_config(config(10_000))]

    #[test]
    fn search_parse_compiles_arbitrary_input_to_safe_fts5_and_tsquery(q in query_text(48)) {
        if let Ok(query) = search::parse(&q) {
            check_query(&query)?;
        }
    }

    #[test]
    fn search_parse_handles_any_unicode(q in any::<String>()) {
        if let Ok(query) = search::parse(&q) {
            check_query(&query)?;
        }
    }

    #[test]
    fn search_structured_queries_parse_to_their_terms((text, expected) in structured_query(false)) {
        let parsed = search::parse(&text);
        prop_assert_eq!(&parsed, &expected, "{:?}", text);
        if let Ok(query) = parsed {
            check_query(&query)?;
        }
    }

    /// Quotes pair up in order, so an odd number of them leaves one open;
    /// the only error that can come first is a lone `*` before it.
    #[test]
    fn search_an_odd_number_of_quotes_is_an_error(q in query_text(32)) {
        let quotes = q.matches('"').count();
        let parsed = search::parse(&q);
        if quotes % 2 == 1 {
            if q.contains('*') {
                prop_assert!(
                    matches!(parsed, Err(QueryError::UnbalancedQuote | QueryError::LonePrefix)),
                    "{:?}: {:?}", q, parsed
                );
            } else {
                prop_assert_eq!(parsed, Err(QueryError::UnbalancedQuote), "{:?}", q);
            }
        } else {
            prop_assert!(parsed != Err(QueryError::UnbalancedQuote), "{:?}", q);
        }
    }

    /// Terms that are all negated, among any unsearchable noise.
    #[test]
    fn search_only_exclusions_is_an_error(
        (text, expected) in structured_query(true),
        noise in proptest::collection::vec(proptest::sample::select(vec!["- ", "!!!", "#", "…", "-\"\"", "\"#\""]), 0..3),
        at in any::<proptest::sample::Index>(),
    ) {
        prop_assert_eq!(&expected, &Err(QueryError::OnlyExclusions));
        prop_assert_eq!(search::parse(&text), Err(QueryError::OnlyExclusions), "{:?}", text);
        let noise = noise.join(" ");
        let q = if at.index(2) == 0 { format!("{noise} {text}") } else { format!("{text} {noise}") };
        prop_assert_eq!(search::parse(&q), Err(QueryError::OnlyExclusions), "{:?}", q);
    }

    /// A token of no letters or digits ending in `*`, anywhere among
    /// well-formed terms.
    #[test]
    fn search_a_lone_prefix_star_is_an_error(
        (text, _) in structured_query(false),
        star in proptest::sample::select(vec!["*", "**", "-*", "#*", "…*", "-**", "(*"]),
        at in any::<proptest::sample::Index>(),
    ) {
        let cuts: Vec<usize> = text
            .char_indices()
            .filter(|&(i, c)| c.is_whitespace() && text[..i].matches('"').count() % 2 == 0)
            .map(|(i, _)| i)
            .collect();
        prop_assume!(!cuts.is_empty());
        let cut = cuts[at.index(cuts.len())];
        let q = format!("{} {star} {}", &text[..cut], &text[cut..]);
        prop_assert_eq!(search::parse(&q), Err(QueryError::LonePrefix), "{:?}", q);
    }

    /// Input without letters, digits, quotes or `*` has nothing to search.
    #[test]
    fn search_nothing_searchable_is_an_error(
        q in proptest::collection::vec(unsearchable_char(), 0..40).prop_map(|cs| cs.into_iter().collect::<String>()),
) {
        prop_assert_eq!(search::parse(&q), Err(QueryError::Empty), "{:?}", q);
    }

    #[test]
    fn search_fold_is_lower_case_without_marks_and_idempotent(s in prop_oneof![query_text(24), any::<String>()]) {
        let folded = search::fold(&s);
        prop_assert_eq!(&search::fold(&folded), &folded, "{:?}", s);
        for c in folded.chars() {
            prop_assert!(c.to_lowercase().eq([c]), "{:?} in fold({:?}) is not lower case", c, s);
        }
    }

    #[test]
    fn search_snippets_are_html_safe_and_bounded(
        text in query_text(200),
        q in query_text(16),
        width in 0usize..120,
    ) {
        let Ok(query) = search::parse(&q) else { return Ok(()) };
        let marks = check_snippet(&text, &query, width)?;
        let (tf, _) = query.term_frequencies(&text);
        if width > 0 && tf.iter().any(|&f| f > 0) {
            prop_assert!(marks > 0, "{:?} matches {:?} but nothing is marked", q, text);
        }
    }

    /// A word of the query planted in arbitrary text is marked.
    #[test]
    fn search_snippets_mark_a_planted_word(
        before in query_text(150),
        after in query_text(150),
        word in folded_word(),
        width in 1usize..120,
    ) {
        let query = search::parse(&word).expect("a word is a query");
        let text = format!("{before} {} {after}", upper(&word));
        let marks = check_snippet(&text, &query, width)?;
        prop_assert!(marks > 0, "{:?} is not marked in {:?}", word, text);
    }
}

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn search_parse_handles_very_long_input(q in query_text(20_000)) {
        if let Ok(query) = search::parse(&q) {
            check_query(&query)?;
        }
    }

    #[test]
    fn search_snippets_of_long_texts_are_html_safe_and_bounded(
        text in query_text(5_000),
        q in query_text(16),
        width in 0usize..400,
    ) {
        let Ok(query) = search::parse(&q) else { return Ok(()) };
        check_snippet(&text, &query, width)?;
    }
}
