//! Messages are written in lightweight markup (CommonMark: `**bold**`,
//! `_italic_`, `` `code` ``, `[links](https://…)`, lists, quotes). Channels
//! that show formatting get it rendered here, safely: raw HTML in a message
//! is shown as text, never passed on, and links keep only web and mail
//! schemes.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH)
}

/// Whether a link may be followed from a rendered message.
fn safe_link(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["https://", "http://", "mailto:", "tel:"].iter().any(|s| lower.starts_with(s))
}

fn escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

/// The text as an HTML fragment (an email's HTML part).
pub fn html(text: &str) -> String {
    let events = parser(text).map(|event| match event {
        // Raw HTML in a message is its text, not markup.
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link { link_type, dest_url, title, id }) if !safe_link(&dest_url) => {
            Event::Start(Tag::Link { link_type, dest_url: "".into(), title, id })
        }
        Event::Start(Tag::Image { dest_url, .. }) => Event::Text(dest_url),
        Event::End(TagEnd::Image) => Event::Text("".into()),
        other => other,
    });
    let mut out = String::with_capacity(text.len() * 2);
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

/// The text in the HTML subset Telegram's `parse_mode: HTML` takes: `b`,
/// `i`, `s`, `code`, `pre`, `a`, `blockquote`; every other construct is
/// written as plain text (list items with bullets, headings in bold).
pub fn telegram_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut lists: Vec<Option<u64>> = Vec::new();
    let mut links: Vec<bool> = Vec::new();
    for event in parser(text) {
        match event {
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => escape(&t, &mut out),
            Event::Code(t) => {
                out.push_str("<code>");
                escape(&t, &mut out);
                out.push_str("</code>");
            }
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("\n——————\n"),
            Event::Start(tag) => match tag {
                Tag::Strong | Tag::Heading { .. } => out.push_str("<b>"),
                Tag::Emphasis => out.push_str("<i>"),
                Tag::Strikethrough => out.push_str("<s>"),
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => match kind {
                    CodeBlockKind::Fenced(lang) if !lang.is_empty() => {
                        out.push_str("<pre><code class=\"language-");
                        escape(&lang, &mut out);
                        out.push_str("\">");
                    }
                    _ => out.push_str("<pre><code>"),
                },
                Tag::List(start) => lists.push(start),
                Tag::Item => {
                    let marker = match lists.last_mut() {
                        Some(Some(n)) => {
                            *n += 1;
                            format!("{}. ", *n - 1)
                        }
                        _ => "• ".to_owned(),
                    };
                    out.push_str(&"  ".repeat(lists.len().saturating_sub(1)));
                    out.push_str(&marker);
                }
                Tag::Link { dest_url, .. } => {
                    let safe = safe_link(&dest_url);
                    if safe {
                        out.push_str("<a href=\"");
                        escape(&dest_url, &mut out);
                        out.push_str("\">");
                    }
                    links.push(safe);
                }
                Tag::Image { dest_url, .. } => escape(&dest_url, &mut out),
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Strong => out.push_str("</b>"),
                TagEnd::Heading(_) => out.push_str("</b>\n\n"),
                TagEnd::Emphasis => out.push_str("</i>"),
                TagEnd::Strikethrough => out.push_str("</s>"),
                TagEnd::BlockQuote(_) => out.push_str("</blockquote>\n"),
                TagEnd::CodeBlock => out.push_str("</code></pre>\n\n"),
                TagEnd::Paragraph => out.push_str("\n\n"),
                TagEnd::Item => out.push('\n'),
                TagEnd::List(_) => {
                    lists.pop();
                    if lists.is_empty() {
                        out.push('\n');
                    }
                }
                TagEnd::Link => {
                    if links.pop() == Some(true) {
                        out.push_str("</a>");
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telegram_gets_its_tags_and_everything_else_escaped() {
        assert_eq!(
            telegram_html("**Order 12** is _on its way_ & `ETA < 2d`"),
            "<b>Order 12</b> is <i>on its way</i> &amp; <code>ETA &lt; 2d</code>"
        );
        assert_eq!(
            telegram_html("Hi <script>alert(1)</script> <b>x</b>"),
            "Hi &lt;script&gt;alert(1)&lt;/script&gt; &lt;b&gt;x&lt;/b&gt;"
        );
        assert_eq!(
            telegram_html("See [the page](https://shop.example/a?b=1&c=2) or [this](javascript:alert(1))"),
            "See <a href=\"https://shop.example/a?b=1&amp;c=2\">the page</a> or this"
        );
        assert_eq!(
            telegram_html("Steps:\n\n1. Log in\n2. Pay\n\n- one\n- two"),
            "Steps:\n\n1. Log in\n2. Pay\n\n• one\n• two"
        );
        assert_eq!(telegram_html("line one\nline two"), "line one\nline two");
    }

    #[test]
    fn html_escapes_raw_html_and_drops_unsafe_links() {
        let out = html("Hello **Ana**\n\n<img src=x onerror=alert(1)> [x](javascript:alert(1)) [y](https://a.example)");
        assert!(out.contains("<strong>Ana</strong>"), "{out}");
        assert!(out.contains("&lt;img src=x onerror=alert(1)&gt;"), "{out}");
        assert!(!out.contains("javascript:"), "{out}");
        assert!(out.contains("<a href=\"https://a.example\">y</a>"), "{out}");
    }
}
