//! The email connector's reading of real-world-shaped messages
//! (tests/mime/, described with their expected values in its README).

use parley_connectors::{FileSource, Inbound, Incoming, parse_mail, trim_reply};
use parley_domain::conversation::{EmailHeaders, MessageStatus};

fn read(file: &str) -> Incoming {
    let raw = std::fs::read(format!("{}/tests/mime/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    parse_mail(&raw).unwrap_or_else(|e| panic!("{file} did not parse: {e:?}"))
}

fn message(file: &str) -> (Inbound, EmailHeaders) {
    match read(file) {
        Incoming::Message(m) => {
            let headers = m.details.email.clone().expect("an email has its headers");
            (m, headers)
        }
        other => panic!("{file} is a message, not {other:?}"),
    }
}

fn name(m: &Inbound) -> Option<&str> {
    m.contact.as_ref().and_then(|c| c.display_name.as_deref())
}

#[test]
fn multipart_alternative_takes_the_text_part_and_decodes_encoded_words() {
    let (m, h) = message("alternative.eml");
    assert_eq!((m.from.as_str(), name(&m)), ("ana@example.org", Some("Ana García")));
    assert_eq!(h.subject, "Bestellung 1234 – Frage");
    assert_eq!(h.message_id, "<CAF1x9Zq7=ana.alt.0001@mail.example.org>");
    assert_eq!(m.external_id, h.message_id);
    assert_eq!(
        m.text,
        "Hallo,\n\nich habe eine Frage zu meiner Bestellung 1234: Wann wird sie voraussichtlich versendet? Ich brauche sie vor dem Wochenende.\n\nViele Grüße\nAna"
    );
    assert!(!m.text.contains('<'), "the plain part, not the HTML");
    assert_eq!((h.in_reply_to, h.references.len(), h.full_text), (None, 0, None));
    assert!(m.attachments.is_empty());
}

#[test]
fn an_html_only_message_becomes_text() {
    let (m, _) = message("html_only.eml");
    assert_eq!((m.from.as_str(), name(&m)), ("dmitri@example.com", Some("Dmitri Volkov")));
    assert!(m.text.contains("Hello Shop & Co team,"), "{}", m.text);
    for markup in ["&amp;", "<p>", "<br>", "Order question"] {
        assert!(!m.text.contains(markup), "{markup} left in {:?}", m.text);
    }
    let yet = m.text.lines().position(|l| l.contains("yet.")).unwrap();
    let could = m.text.lines().position(|l| l.contains("Could")).unwrap();
    assert!(could > yet, "a <br> is a line break: {:?}", m.text);
    assert!(m.text.contains("Dmitri"));
}

#[test]
fn attachments_are_kept_with_their_decoded_names_types_and_bytes() {
    let (m, _) = message("attachments.eml");
    assert_eq!(m.text, "Hi,\n\nplease find the March invoice and a screenshot attached.\n\nRegards,\nErik");
    assert!(!m.text.contains("multi-part message"), "the preamble is not the body");
    let files: Vec<(&str, &str, usize, Vec<u8>)> = m
        .attachments
        .iter()
        .map(|a| match &a.source {
            FileSource::Inline(bytes) => {
                (a.filename.as_str(), a.content_type.as_str(), bytes.len(), bytes[..4].to_vec())
            }
            FileSource::Remote(_) => panic!("an email's files are in the message"),
        })
        .collect();
    assert_eq!(
        files,
        vec![
            ("Rechnung März.png", "image/png", 69, vec![0x89, b'P', b'N', b'G']),
            ("invoice.pdf", "application/pdf", 142, b"%PDF".to_vec()),
        ]
    );
}

#[test]
fn latin1_bodies_and_headers_are_decoded() {
    let (m, h) = message("latin1.eml");
    assert_eq!((m.from.as_str(), name(&m)), ("joao@correio.example.com.br", Some("João Silva")));
    assert_eq!(h.subject, "Pedido não recebido");
    assert_eq!(m.text, "Olá, não recebi o pedido. Até logo.\n\nJoão");
}

#[test]
fn a_delivery_status_notification_fails_the_message_it_names() {
    match read("dsn_bounce.eml") {
        Incoming::Status(report) => {
            assert_eq!(report.external_id, "<parley.msg.42@shop.example>");
            assert_eq!(report.status, MessageStatus::Failed);
            let error = report.error.unwrap();
            assert!(error.contains("nobody@example.net"), "{error}");
            assert!(error.contains("5.1.1"), "{error}");
            assert!(
                error.contains("550 5.1.1 <nobody@example.net>: Recipient address rejected: User unknown"),
                "{error}"
            );
        }
        other => panic!("a bounce is a status report, not {other:?}"),
    }
}

#[test]
fn an_outlook_reply_is_trimmed_to_its_new_text_and_names_its_thread() {
    let (m, h) = message("outlook_reply.eml");
    assert_eq!(m.text, "Yes, Tuesday works for me.\n\nThanks,\nBen");
    assert_eq!(h.in_reply_to.as_deref(), Some("<parley.msg.41@shop.example>"));
    assert_eq!(h.references, vec!["<parley.msg.40@shop.example>", "<parley.msg.41@shop.example>"]);
    assert_eq!(m.answers, vec!["<parley.msg.41@shop.example>", "<parley.msg.40@shop.example>"], "parent first");
    let full = h.full_text.expect("the whole body is kept");
    assert!(full.contains("From: Shop Support") && full.starts_with("Yes, Tuesday"), "{full}");
}

#[test]
fn a_gmail_reply_loses_its_signature_and_quote() {
    let (m, h) = message("gmail_reply.eml");
    assert_eq!((m.from.as_str(), name(&m)), ("carla.diaz@gmail.example", Some("Carla Díaz")));
    assert_eq!(m.text, "Perfect, see you then! Please ring the bell twice.");
    assert_eq!(h.in_reply_to.as_deref(), Some("<parley.msg.43@shop.example>"));
    assert!(h.full_text.unwrap().contains("wrote:"));
}

#[test]
fn reply_trimming_keeps_text_that_is_all_new() {
    assert_eq!(trim_reply("Just one line"), "Just one line");
    assert_eq!(trim_reply("Hi\n\nSent from my iPhone"), "Hi");
    assert_eq!(trim_reply("Sure.\n\n-----Original Message-----\nFrom: x"), "Sure.");
    assert_eq!(trim_reply("Ok\nOn Tue, Nov 24, 2026 at 9:00 AM Shop <s@shop.example>\nwrote:\n> hi"), "Ok");
    // A message that is only a quote keeps everything rather than nothing.
    assert_eq!(trim_reply("> quoted only"), "> quoted only");
}

#[test]
fn garbage_and_messages_without_a_sender_are_refused() {
    assert!(parse_mail(b"").is_err());
    assert!(parse_mail(b"Subject: hi\r\n\r\nno sender").is_err());
    // Auto-replies are not conversation.
    let auto = b"From: a@example.org\r\nAuto-Submitted: auto-replied\r\nSubject: Out of office\r\n\r\nAway";
    assert_eq!(parse_mail(auto).unwrap(), Incoming::Ignored);
}
