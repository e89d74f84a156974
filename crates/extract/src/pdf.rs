//! PDF text with `pdf-extract`, made safe to run on any file first.
//!
//! `pdf-extract` walks what a PDF says without limits: a page's `Parent`
//! chain to find inherited resources, and a form XObject's drawing (`Do`)
//! into the form, which may draw itself (the 745-byte PDF that overflowed
//! the stack) or fan out exponentially; and `lopdf` inflates compressed
//! streams with no cap. So before the text is extracted, this module
//!
//! 1. inflates every compressed stream under one budget
//!    ([`Limits::max_inflated_bytes`]), object streams as they are loaded;
//! 2. writes each page's inherited `Resources` and `MediaBox` onto the page
//!    itself (found by a bounded walk), so nothing walks `Parent` again;
//! 3. walks the form drawings the way `pdf-extract` will, refusing a form
//!    that draws itself, nests deeper than [`MAX_FORM_DEPTH`] or would be
//!    run more than [`MAX_FORM_RUNS`] times;
//!
//! and the extraction writes into a [`Budget`] that stops it at the
//! character limit or the deadline.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read;

use lopdf::content::Content;
use lopdf::{Dictionary, Document, LoadOptions, Object, Stream};
use pdf_extract::{ColorSpace, MediaBox, OutputDev, OutputError, Path, PlainTextOutput, Transform};

use crate::{Budget, ExtractError, Limits, group_digits};

/// Levels of forms drawing forms.
pub const MAX_FORM_DEPTH: usize = 12;
/// Times forms may be drawn in the whole document.
pub const MAX_FORM_RUNS: u64 = 10_000;
/// Levels of `Parent` above a page.
const MAX_PAGE_TREE_DEPTH: usize = 64;
/// The page size when a PDF gives none (US Letter, in points).
const DEFAULT_MEDIA_BOX: [i64; 4] = [0, 0, 612, 792];

thread_local! {
    /// Bytes object streams may still inflate to while a document loads on
    /// this thread (`LoadOptions::filter` is a plain function), and whether
    /// one went over.
    static LOAD_BUDGET: Cell<usize> = const { Cell::new(0) };
    static LOAD_OVER: Cell<bool> = const { Cell::new(false) };
}

/// The text of a PDF.
pub fn text(bytes: &[u8], limits: Limits) -> Result<String, ExtractError> {
    let mut doc = load(bytes, limits.max_inflated_bytes)?;
    if doc.is_encrypted() {
        doc.decrypt("").map_err(|_| {
            ExtractError::Unreadable("the PDF is encrypted with a password; upload it without one".into())
        })?;
    }
    let mut inflated = 0;
    inflate_streams(&mut doc, limits.max_inflated_bytes, &mut inflated)?;
    flatten_pages(&mut doc)?;
    check_forms(&doc)?;
    let mut budget = Budget::new(limits);
    budget.check_time()?;
    let result = {
        let mut output = Guarded { inner: PlainTextOutput::new(&mut budget), deadline: limits.deadline, ticks: 0 };
        pdf_extract::output_doc(&doc, &mut output)
    };
    if let Some(e) = budget.stopped() {
        return Err(e.clone());
    }
    match result {
        Ok(()) => Ok(budget.into_text()),
        Err(OutputError::FormatError(_)) => Err(limits.timed_out()),
        Err(e) => Err(ExtractError::Unreadable(format!("could not read the PDF: {e}"))),
    }
}

fn load(bytes: &[u8], max_inflated: usize) -> Result<Document, ExtractError> {
    LOAD_BUDGET.set(max_inflated);
    LOAD_OVER.set(false);
    let loaded = Document::load_mem_with_options(bytes, LoadOptions::with_filter(guard_object_stream));
    if LOAD_OVER.get() {
        return Err(too_large(max_inflated));
    }
    loaded.map_err(|e| ExtractError::Unreadable(format!("could not read the PDF: {e}")))
}

fn too_large(max: usize) -> ExtractError {
    ExtractError::TooLarge(format!(
        "the PDF's compressed content expands to more than {} MiB",
        group_digits(max / (1024 * 1024))
    ))
}

/// The load filter: inflates object streams (which lopdf inflates as it
/// loads) within what is left of the budget; one over it is emptied, so
/// the load fails instead of filling memory.
fn guard_object_stream(id: (u32, u16), object: &mut Object) -> Option<((u32, u16), Object)> {
    if let Object::Stream(stream) = object
        && stream.dict.has_type(b"ObjStm")
    {
        let left = LOAD_BUDGET.get();
        match inflate(stream, left) {
            Ok(Inflated { size, plain }) => {
                LOAD_BUDGET.set(left - size);
                if let Some(plain) = plain {
                    stream.set_plain_content(plain);
                }
            }
            Err(()) => {
                LOAD_OVER.set(true);
                stream.set_plain_content(Vec::new());
            }
        }
    }
    // lopdf keeps the object it lent for a top-level object and takes the
    // returned one for an object-stream member (never a stream).
    match object {
        Object::Stream(_) => Some((id, Object::Null)),
        other => Some((id, other.clone())),
    }
}

/// A stream's inflated size, and its inflated content when it can stand in
/// for the stream as is (one FlateDecode, no predictor).
struct Inflated {
    size: usize,
    plain: Option<Vec<u8>>,
}

/// Inflates `stream`'s filters within `limit` bytes; `Err` past it.
/// Filters this does not know are left to lopdf (which fails on them, or
/// shrinks: ASCII85) and count their compressed size.
fn inflate(stream: &Stream, limit: usize) -> Result<Inflated, ()> {
    let Ok(filters) = stream.filters() else {
        return Ok(Inflated { size: 0, plain: None });
    };
    let mut data: Vec<u8> = stream.content.clone();
    let mut decoded_all = true;
    // lopdf decodes these three (in any chain); any other filter it refuses,
    // and what follows stays undecoded.
    for filter in &filters {
        data = match *filter {
            b"FlateDecode" | b"Fl" => zlib(&data, limit)?,
            b"LZWDecode" | b"LZW" => lzw(&data, limit, stream)?,
            b"ASCII85Decode" | b"A85" => ascii85(&data),
            _ => {
                decoded_all = false;
                break;
            }
        };
    }
    if data.len() > limit {
        return Err(());
    }
    let simple = decoded_all && filters.len() == 1 && stream.dict.get(b"DecodeParms").is_err();
    Ok(Inflated { size: data.len(), plain: simple.then_some(data) })
}

/// ASCII base-85 (PDF's `ASCII85Decode`): at most 4 bytes for every 5
/// characters, so it needs no limit.
fn ascii85(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() * 4 / 5 + 4);
    let mut group = [0u32; 5];
    let mut n = 0;
    let flush = |group: &[u32; 5], n: usize, out: &mut Vec<u8>| {
        let mut padded = *group;
        for slot in padded.iter_mut().skip(n) {
            *slot = 84;
        }
        let value = padded.iter().fold(0u64, |acc, d| acc * 85 + u64::from(*d));
        let bytes = (value as u32).to_be_bytes();
        out.extend_from_slice(&bytes[..n.saturating_sub(1)]);
    };
    let body = input.strip_prefix(b"<~").unwrap_or(input);
    for &c in body {
        match c {
            b'~' => break,
            b'z' if n == 0 => out.extend_from_slice(&[0; 4]),
            b'!'..=b'u' => {
                group[n] = u32::from(c - b'!');
                n += 1;
                if n == 5 {
                    flush(&group, 5, &mut out);
                    n = 0;
                }
            }
            _ => {}
        }
    }
    if n > 1 {
        flush(&group, n, &mut out);
    }
    out
}

/// zlib (with lopdf's fallback to raw deflate for a broken header or
/// checksum), at most `limit + 1` bytes.
fn zlib(input: &[u8], limit: usize) -> Result<Vec<u8>, ()> {
    let cap = (limit as u64).saturating_add(1);
    let mut out = Vec::new();
    let failed = flate2::read::ZlibDecoder::new(input).take(cap).read_to_end(&mut out).is_err();
    if failed && out.is_empty() && input.len() > 2 {
        let _ = flate2::read::DeflateDecoder::new(&input[2..]).take(cap).read_to_end(&mut out);
    }
    if out.len() > limit { Err(()) } else { Ok(out) }
}

/// LZW as lopdf decodes it (`EarlyChange` defaulting to 1), at most `limit + 1` bytes.
fn lzw(input: &[u8], limit: usize, stream: &Stream) -> Result<Vec<u8>, ()> {
    use weezl::BitOrder;
    use weezl::decode::Decoder;
    let early = stream
        .dict
        .get(b"DecodeParms")
        .and_then(Object::as_dict)
        .and_then(|p| p.get(b"EarlyChange"))
        .and_then(Object::as_i64)
        .map_or(true, |v| v != 0);
    let mut decoder =
        if early { Decoder::with_tiff_size_switch(BitOrder::Msb, 8) } else { Decoder::new(BitOrder::Msb, 8) };
    let mut out = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let mut rest = input;
    loop {
        let result = decoder.decode_bytes(rest, &mut buffer);
        out.extend_from_slice(&buffer[..result.consumed_out]);
        if out.len() > limit {
            return Err(());
        }
        rest = &rest[result.consumed_in..];
        match result.status {
            Ok(weezl::LzwStatus::Ok) if result.consumed_in > 0 || result.consumed_out > 0 => {}
            _ => break,
        }
    }
    Ok(out)
}

/// Inflates every stream under the budget (`inflated` counts across calls).
fn inflate_streams(doc: &mut Document, max: usize, inflated: &mut usize) -> Result<(), ExtractError> {
    let left = LOAD_BUDGET.get().min(max);
    for object in doc.objects.values_mut() {
        let Object::Stream(stream) = object else { continue };
        // Images carry no text, yet pdf-extract would inflate one it is told
        // to draw (and read it as drawing instructions): they are emptied.
        if stream.dict.get(b"Subtype").and_then(Object::as_name).is_ok_and(|s| s == b"Image") {
            stream.set_plain_content(Vec::new());
            continue;
        }
        let room = left.saturating_sub(*inflated);
        let Inflated { size, plain } = inflate(stream, room).map_err(|()| too_large(max))?;
        *inflated += size;
        if let Some(plain) = plain {
            stream.set_plain_content(plain);
        }
    }
    Ok(())
}

/// Writes each page's inherited `Resources` and `MediaBox` onto the page,
/// from a walk up its `Parent`s that stops at a loop or 64 levels.
fn flatten_pages(doc: &mut Document) -> Result<(), ExtractError> {
    let pages: Vec<_> = doc.get_pages().into_values().collect();
    for page_id in pages {
        let Ok(page) = doc.get_dictionary(page_id) else { continue };
        let resources = inherited(doc, page, b"Resources");
        let media_box = inherited(doc, page, b"MediaBox").filter(|b| is_box(doc, b));
        let page = doc
            .get_object_mut(page_id)
            .and_then(Object::as_dict_mut)
            .map_err(|e| ExtractError::Unreadable(format!("could not read the PDF: {e}")))?;
        page.remove(b"Parent");
        match resources {
            Some(r) => page.set("Resources", r),
            None => page.set("Resources", Dictionary::new()),
        }
        match media_box {
            Some(b) => page.set("MediaBox", b),
            None => page.set("MediaBox", DEFAULT_MEDIA_BOX.iter().map(|n| Object::Integer(*n)).collect::<Vec<_>>()),
        }
    }
    Ok(())
}

/// `key` of `node` or of the nearest `Parent` that has it.
fn inherited(doc: &Document, node: &Dictionary, key: &[u8]) -> Option<Object> {
    let mut node = node;
    for _ in 0..MAX_PAGE_TREE_DEPTH {
        if let Ok(found) = node.get(key) {
            return Some(found.clone());
        }
        node = node.get(b"Parent").and_then(Object::as_reference).and_then(|id| doc.get_dictionary(id)).ok()?;
    }
    None
}

/// Four numbers (pdf-extract reads a box as `[f64; 4]` and panics otherwise).
fn is_box(doc: &Document, o: &Object) -> bool {
    let o = deref(doc, o);
    o.as_array()
        .is_ok_and(|a| a.len() == 4 && a.iter().all(|n| matches!(deref(doc, n), Object::Integer(_) | Object::Real(_))))
}

fn deref<'a>(doc: &'a Document, o: &'a Object) -> &'a Object {
    match o {
        Object::Reference(id) => doc.get_object(*id).unwrap_or(o),
        _ => o,
    }
}

/// Walks the forms each page draws, as pdf-extract will: a `Do` names an
/// XObject in the current resources, which runs with its own resources or
/// else the caller's.
fn check_forms(doc: &Document) -> Result<(), ExtractError> {
    let mut walk = FormWalk { doc, runs: HashMap::new(), on_stack: Vec::new(), total: 0 };
    for page_id in doc.get_pages().into_values() {
        let Ok(page) = doc.get_dictionary(page_id) else { continue };
        let Some(resources) = page.get(b"Resources").ok().map(|r| deref(doc, r)).and_then(|r| r.as_dict().ok()) else {
            continue;
        };
        let content = doc.get_page_content(page_id).unwrap_or_default();
        let (runs, _) = walk.runs_of(&content, resources, 0)?;
        walk.total = walk.total.saturating_add(runs);
        if walk.total > MAX_FORM_RUNS {
            return Err(too_many_runs());
        }
    }
    Ok(())
}

fn too_many_runs() -> ExtractError {
    ExtractError::TooLarge(format!(
        "the PDF's drawings repeat each other more than {} times",
        group_digits(MAX_FORM_RUNS as usize)
    ))
}

struct FormWalk<'a> {
    doc: &'a Document,
    /// Forms drawn by one run of a form with given resources, and how many
    /// levels of forms it nests (by address: the document does not change
    /// during the walk).
    runs: HashMap<(usize, usize), (u64, usize)>,
    /// The forms being walked, outermost first.
    on_stack: Vec<usize>,
    total: u64,
}

impl<'a> FormWalk<'a> {
    /// How many form runs drawing `content` with `resources` makes, and
    /// how deep its forms nest below it.
    fn runs_of(
        &mut self,
        content: &[u8],
        resources: &'a Dictionary,
        depth: usize,
    ) -> Result<(u64, usize), ExtractError> {
        let Ok(ops) = Content::decode(content) else { return Ok((0, 0)) };
        let mut runs: u64 = 0;
        let mut height = 0;
        for op in ops.operations.iter().filter(|op| op.operator == "Do") {
            let Some(name) = op.operands.first().and_then(|n| n.as_name().ok()) else { continue };
            let Some(xobjects) =
                resources.get(b"XObject").ok().map(|x| deref(self.doc, x)).and_then(|x| x.as_dict().ok())
            else {
                continue;
            };
            let Some(form) = xobjects.get(name).ok().map(|f| deref(self.doc, f)).and_then(|f| f.as_stream().ok())
            else {
                continue;
            };
            let own = form
                .dict
                .get(b"Resources")
                .ok()
                .map(|r| deref(self.doc, r))
                .and_then(|r| r.as_dict().ok())
                .unwrap_or(resources);
            let (below, nested) = self.form(form, own, depth + 1)?;
            runs = runs.saturating_add(1).saturating_add(below);
            height = height.max(nested + 1);
            if runs.saturating_add(self.total) > MAX_FORM_RUNS {
                return Err(too_many_runs());
            }
        }
        Ok((runs, height))
    }

    fn form(
        &mut self,
        form: &'a Stream,
        resources: &'a Dictionary,
        depth: usize,
    ) -> Result<(u64, usize), ExtractError> {
        let key = (form as *const Stream as usize, resources as *const Dictionary as usize);
        if self.on_stack.contains(&key.0) {
            return Err(ExtractError::TooDeep("the PDF has a drawing (form XObject) that draws itself".into()));
        }
        let too_deep = || {
            ExtractError::TooDeep(format!(
                "the PDF's drawings (form XObjects) nest more than {MAX_FORM_DEPTH} levels deep"
            ))
        };
        if depth > MAX_FORM_DEPTH {
            return Err(too_deep());
        }
        // Walked before, from elsewhere: its depth below counts from here too.
        if let Some(&(runs, height)) = self.runs.get(&key) {
            return if depth + height > MAX_FORM_DEPTH { Err(too_deep()) } else { Ok((runs, height)) };
        }
        self.on_stack.push(key.0);
        // Inflated by `inflate_streams`, or left compressed as pdf-extract reads it.
        let content = if form.filters().is_ok() {
            form.decompressed_content().unwrap_or_else(|_| form.content.clone())
        } else {
            form.content.clone()
        };
        let runs = self.runs_of(&content, resources, depth);
        self.on_stack.pop();
        let found = runs?;
        self.runs.insert(key, found);
        Ok(found)
    }
}

impl<'a> pdf_extract::ConvertToFmt for &'a mut Budget {
    type Writer = &'a mut Budget;
    fn convert(self) -> Self::Writer {
        self
    }
}

/// pdf-extract's plain-text output, checking the clock as drawing goes on
/// (text checks it in the budget; drawings without text here).
struct Guarded<'b> {
    inner: PlainTextOutput<&'b mut Budget>,
    deadline: std::time::Instant,
    ticks: u32,
}

impl Guarded<'_> {
    fn tick(&mut self) -> Result<(), OutputError> {
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks % 256 == 0 && std::time::Instant::now() >= self.deadline {
            return Err(OutputError::FormatError(std::fmt::Error));
        }
        Ok(())
    }
}

impl OutputDev for Guarded<'_> {
    fn begin_page(
        &mut self,
        page: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.tick()?;
        self.inner.begin_page(page, media_box, art_box)
    }
    fn end_page(&mut self) -> Result<(), OutputError> {
        self.inner.end_page()
    }
    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        self.inner.output_character(trm, width, spacing, font_size, char)
    }
    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.inner.begin_word()
    }
    fn end_word(&mut self) -> Result<(), OutputError> {
        self.inner.end_word()
    }
    fn end_line(&mut self) -> Result<(), OutputError> {
        self.inner.end_line()
    }
    fn stroke(&mut self, _: &Transform, _: &ColorSpace, _: &[f64], _: &Path) -> Result<(), OutputError> {
        self.tick()
    }
    fn fill(&mut self, _: &Transform, _: &ColorSpace, _: &[f64], _: &Path) -> Result<(), OutputError> {
        self.tick()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use lopdf::content::Operation;
    use lopdf::{Stream, dictionary};

    use super::*;
    use crate::TIME_LIMIT;

    fn font() -> Dictionary {
        dictionary! {"Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "Encoding" => "WinAnsiEncoding"}
    }

    fn show(line: &str) -> Vec<Operation> {
        vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 12.into()]),
            Operation::new("Td", vec![72.into(), 700.into()]),
            Operation::new("Tj", vec![Object::string_literal(line)]),
            Operation::new("ET", vec![]),
        ]
    }

    /// A one-page PDF: its content, its XObjects (name, content, resources
    /// of its own), and whether the content is compressed.
    pub(crate) fn build(page: Vec<Operation>, forms: Vec<(&str, Vec<Operation>, bool)>, compress: bool) -> Vec<u8> {
        let mut doc = Document::with_version("1.5");
        let pages_id = doc.new_object_id();
        let font_id = doc.add_object(font());
        let mut xobjects = Dictionary::new();
        // Forms are numbered after the page's objects; a form may name any of them.
        for (name, ops, own_resources) in &forms {
            let mut dict = dictionary! {"Type" => "XObject", "Subtype" => "Form", "BBox" => vec![0.into(), 0.into(), 612.into(), 792.into()]};
            if *own_resources {
                dict.set("Resources", dictionary! {"Font" => dictionary! {"F1" => font_id}});
            }
            let content = Content { operations: ops.clone() }.encode().unwrap();
            let id = doc.add_object(Stream::new(dict, content));
            xobjects.set(name.as_bytes().to_vec(), id);
        }
        let resources_id = doc.add_object(dictionary! {"Font" => dictionary! {"F1" => font_id}, "XObject" => xobjects});
        let mut stream = Stream::new(dictionary! {}, Content { operations: page }.encode().unwrap());
        if compress {
            stream.compress().unwrap();
        }
        let content_id = doc.add_object(stream);
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! {
                "Type" => "Pages", "Kids" => vec![page_id.into()], "Count" => 1,
                "Resources" => resources_id, "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            }),
        );
        let catalog_id = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
        doc.trailer.set("Root", catalog_id);
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    fn draw(name: &str) -> Operation {
        Operation::new("Do", vec![Object::Name(name.as_bytes().to_vec())])
    }

    #[test]
    fn reads_text_from_a_compressed_page() {
        let pdf = build(show("We open at 9am"), vec![], true);
        assert_eq!(text(&pdf, Limits::standard()).unwrap().trim(), "We open at 9am");
    }

    #[test]
    fn a_form_that_draws_itself_is_refused() {
        // The page's resources name X0; X0 has none of its own, so it draws X0 again.
        let pdf = build(vec![draw("X0")], vec![("X0", vec![draw("X0")], false)], false);
        assert!(pdf.len() < 1500, "a small file: {} bytes", pdf.len());
        let e = text(&pdf, Limits::standard()).unwrap_err();
        assert_eq!(e, ExtractError::TooDeep("the PDF has a drawing (form XObject) that draws itself".into()));
    }

    #[test]
    fn forms_that_fan_out_are_refused() {
        // Each level draws the next ten times: 10^6 runs from seven small forms.
        let names = ["A", "B", "C", "D", "E", "F", "G"];
        let forms = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let ops = match names.get(i + 1) {
                    Some(next) => (0..10).map(|_| draw(next)).collect(),
                    None => show("leaf"),
                };
                (*n, ops, false)
            })
            .collect();
        let e = text(&build(vec![draw("A")], forms, false), Limits::standard()).unwrap_err();
        assert_eq!(e, too_many_runs());
    }

    #[test]
    fn forms_drawn_a_few_times_are_read() {
        let forms = vec![("A", vec![draw("B"), draw("B")], false), ("B", show("inner"), true)];
        let out = text(&build(vec![draw("A")], forms, false), Limits::standard()).unwrap();
        assert_eq!(out.matches("inner").count(), 2, "{out:?}");
    }

    #[test]
    fn an_inflation_bomb_is_refused() {
        // 64 MiB of spaces compress to about 64 KiB.
        let mut ops = show("x");
        ops.push(Operation::new("Tj", vec![Object::string_literal(" ".repeat(64 * 1024 * 1024))]));
        let pdf = build(ops, vec![], true);
        let mut limits = Limits::standard();
        limits.max_inflated_bytes = 16 * 1024 * 1024;
        assert!(matches!(text(&pdf, limits), Err(ExtractError::TooLarge(_))));
    }

    #[test]
    fn text_stops_at_the_limit_and_the_deadline() {
        let mut ops = Vec::new();
        for i in 0..2000 {
            ops.extend(show(&format!("line number {i}")));
        }
        let pdf = build(ops, vec![], true);
        assert_eq!(text(&pdf, Limits::with(500, TIME_LIMIT)), Err(ExtractError::TooLong { max_chars: 500 }));
        assert!(matches!(text(&pdf, Limits::with(1_000_000, Duration::ZERO)), Err(ExtractError::TimedOut { .. })));
    }

    #[test]
    fn ascii85_decodes_as_adobe_writes_it() {
        assert_eq!(ascii85(b"<~87cURD_*#4DfTZ)~>"), b"Hello, World");
        assert_eq!(ascii85(b"z!!~>"), [0, 0, 0, 0, 0]);
        assert!(ascii85(b"").is_empty());
    }

    /// `data` as ASCII85 (the test's own encoder).
    fn to_ascii85(data: &[u8]) -> Vec<u8> {
        let mut encoded = Vec::new();
        for chunk in data.chunks(4) {
            let mut word = [0u8; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            let mut v = u32::from_be_bytes(word);
            let mut digits = [0u8; 5];
            for d in digits.iter_mut().rev() {
                *d = (v % 85) as u8 + b'!';
                v /= 85;
            }
            encoded.extend_from_slice(&digits[..chunk.len() + 1]);
        }
        encoded.extend_from_slice(b"~>");
        encoded
    }

    #[test]
    fn a_chain_through_ascii85_is_inflated_under_the_budget() {
        // 64 MiB of spaces, deflated, then ASCII85-encoded: lopdf decodes the
        // chain whole, so the budget must see through it.
        let content = vec![b' '; 64 * 1024 * 1024];
        let deflated = {
            use std::io::Write;
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(&content).unwrap();
            z.finish().unwrap()
        };
        let filters = vec![Object::Name(b"ASCII85Decode".to_vec()), Object::Name(b"FlateDecode".to_vec())];
        let stream = Stream::new(dictionary! {"Filter" => filters}, to_ascii85(&deflated));
        assert!(inflate(&stream, 16 * 1024 * 1024).is_err(), "over the limit through the chain");
        assert_eq!(inflate(&stream, 128 * 1024 * 1024).unwrap().size, content.len());
    }

    #[test]
    fn a_memoised_form_still_counts_its_depth() {
        // F0 draws F1 … F8 (8 levels); the page draws F0 directly, then
        // through a chain of 5 wrappers W0…W4 (13 levels in all).
        let mut forms: Vec<(String, Vec<Operation>)> = (0..9)
            .map(|i| (format!("F{i}"), if i < 8 { vec![draw(&format!("F{}", i + 1))] } else { show("leaf") }))
            .collect();
        forms.extend(
            (0..5).map(|i| (format!("W{i}"), vec![draw(&if i < 4 { format!("W{}", i + 1) } else { "F0".into() })])),
        );
        let forms = forms.iter().map(|(n, ops)| (n.as_str(), ops.clone(), false)).collect();
        let e = text(&build(vec![draw("F0"), draw("W0")], forms, false), Limits::standard()).unwrap_err();
        assert!(matches!(e, ExtractError::TooDeep(ref why) if why.contains("nest more than 12")), "{e:?}");
    }

    #[test]
    fn junk_is_unreadable_not_a_panic() {
        assert!(matches!(text(b"%PDF-1.4 junk", Limits::standard()), Err(ExtractError::Unreadable(_))));
        assert!(crate::document_text("application/pdf", b"", Limits::standard()).is_err());
    }
}
