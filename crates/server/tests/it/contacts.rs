//! Contacts: normalisation, uniqueness, identities, filters, merge, CSV
//! import and address resolution.

use parley_domain::contact::Identity;
use parley_domain::{Mode, Scope};
use parley_services::crm::contacts::{self, ContactsConfig};
use serde_json::{Value, json};

use crate::support::*;

pub(crate) async fn import(app: &TestApp, key: &str, csv: String) -> Resp {
    let r = app
        .client
        .post(app.url("/api/v1/contacts/import"))
        .header("X-API-Key", key)
        .header("Content-Type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

fn sorted_keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

async fn count(app: &TestApp, sql: &'static str) -> i64 {
    let mut c = app.db.read().await.unwrap();
    let (n,): (i64,) = parley_store::fetch_one!(&mut c, sqlx::query_as(sql)).unwrap();
    n
}

both_backends! {
    async fn phone_numbers_in_real_world_formats_are_one_number(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let first = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana", "phone": "(415) 555-0100"})).await;
        assert_eq!(first.status, 201, "{}", first.text);
        assert_eq!(first.body["normalized_phone"], "+14155550100");
        let id = first.body["id"].as_i64().unwrap();
        // Every way of writing the same US number collides with the first.
        for raw in ["+1 415 555 0100", "415.555.0100", "1-415-555-0100", "+1 (415) 555-0100", "tel:+1-415-555-0100", "001 415 555 0100", "4155550100"] {
            let r = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Dup", "phone": raw})).await;
            assert_eq!(r.status, 409, "{raw}: {}", r.text);
            assert_eq!(r.body["detail"], format!("Contact {id} already has the phone number +14155550100"), "{raw}");
        }
        // Numbers of other countries, written internationally.
        for (raw, e164) in [("+44 20 7946 0958", "+442079460958"), ("0044 20 7946 0958", "+442079460958"), ("+49 30 901820", "+4930901820"), ("0049 (30) 901820", "+4930901820")] {
            let r = app.post(&ws.test, "/api/v1/contacts", json!({"display_name": raw, "phone": raw})).await;
            match r.status {
                201 => assert_eq!(r.body["normalized_phone"], e164, "{raw}"),
                409 => assert!(r.body["detail"].as_str().unwrap().ends_with(e164), "{raw}: {}", r.text),
                _ => panic!("{raw}: {}", r.text),
            }
        }
        // National formats are read in the configured region.
        let uk = TestApp::spawn_with(backend, |s| s.contacts.default_region = "GB".into()).await;
        let uk_ws = uk.workspace("London").await;
        for raw in ["020 7946 0958", "(020) 7946-0958", "+44 20 7946 0958"] {
            let r = uk.post(&uk_ws.live, "/api/v1/contacts", json!({"display_name": "Ben", "phone": raw})).await;
            assert!(r.status == 201 || r.status == 409, "{raw}: {}", r.text);
        }
        assert_eq!(uk.get(&uk_ws.live, "/api/v1/contacts").await.body["items"][0]["normalized_phone"], "+442079460958");
        assert_eq!(uk.get(&uk_ws.live, "/api/v1/contacts").await.body["total"], 1);

        // Invalid numbers and emails are 422s of their own types, reported together.
        let r = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "X", "phone": "+1 123 456 7890", "email": "not-an-email"})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let errors: Vec<(Value, Value)> = r.body["detail"].as_array().unwrap().iter().map(|e| (e["loc"].clone(), e["type"].clone())).collect();
        assert_eq!(errors, [(json!(["body", "phone"]), json!("value_error.phone")), (json!(["body", "email"]), json!("value_error.email"))]);
    }

    async fn emails_names_and_the_list_item_are_normalised(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let r = app.post(&ws.live, "/api/v1/contacts", json!({
            "display_name": "  Ana   María\tLópez ", "email": "  Ana.Lopez@BÜCHER.example ",
            "tags": ["vip", " beta ", "vip"], "metadata": {"crm_id": 7},
            "identities": [{"channel": "whatsapp", "address": "+1 415 555 0199"}, {"channel": "telegram", "address": "ana_l"}],
        })).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let c = &r.body;
        assert_eq!(c["normalized_email"], "ana.lopez@xn--bcher-kva.example");
        assert_eq!(c["canonical_name"], "ana maría lópez");
        assert_eq!(c["tags"], json!(["vip", "beta"]));
        assert_eq!(c["origin"], "manual");
        assert_eq!(c["identities"], json!([{"channel": "whatsapp", "address": "+14155550199"}, {"channel": "telegram", "address": "ana_l"}]));
        let dup = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Other", "email": "ANA.LOPEZ@bücher.example"})).await;
        assert_eq!(dup.status, 409);
        assert_eq!(dup.body["detail"], format!("Contact {} already has the email ana.lopez@xn--bcher-kva.example", c["id"]));
        let dup = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Other", "identities": [{"channel": "telegram", "address": "ana_l"}]})).await;
        assert_eq!((dup.status, dup.body["detail"].clone()), (409, json!(format!("Contact {} already has the identity telegram:ana_l", c["id"]))));

        // The list item: the documented fields plus tags, origin, identities, metadata.
        let list = app.get(&ws.live, "/api/v1/contacts").await.body;
        assert_eq!((list["total"].clone(), list["limit"].clone(), list["offset"].clone()), (json!(1), json!(50), json!(0)));
        assert_eq!(
            sorted_keys(&list["items"][0]),
            ["avatar_url", "canonical_name", "created_at", "display_name", "id", "identities", "metadata", "normalized_email", "normalized_phone", "notes", "origin", "tags", "updated_at"]
        );
        // Without a name, the email or phone names the contact.
        let r = app.post(&ws.live, "/api/v1/contacts", json!({"phone": "+1 212 555 0142"})).await;
        assert_eq!((r.status, r.body["display_name"].clone()), (201, json!("+12125550142")));
        let r = app.post(&ws.live, "/api/v1/contacts", json!({})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "display_name"])));
        let r = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "X", "avatar_url": "ftp://x", "identities": [{"channel": "pager", "address": "1"}], "role": "admin"})).await;
        let types: Vec<&str> = r.body["detail"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["value_error.url", "value_error.enum", "value_error.extra"], "{}", r.text);
        assert_eq!(app.events(ws.id, Mode::Live, "contact.created").await.len(), 2);
    }

    async fn filters_find_contacts_by_partial_name_phone_email_tag_origin_and_time(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let ana = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana Lopez", "phone": "+14155550100", "email": "ana@example.com", "tags": ["vip"]})).await.body;
        let bo = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Bo Chen", "phone": "+442079460958", "email": "bo@corp.example"})).await.body;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let cut = parley_domain::Timestamp::now().to_rfc3339();
        let cy = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Cy", "tags": ["vip", "beta"]})).await.body;
        let ids = |v: Value| -> Vec<i64> { v["items"].as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect() };
        let (a, b, c) = (ana["id"].as_i64().unwrap(), bo["id"].as_i64().unwrap(), cy["id"].as_i64().unwrap());
        for (q, want) in [
            ("lop", vec![a]), ("LOPEZ", vec![a]), ("an", vec![a]), ("bo@corp", vec![b]), ("example", vec![b, a]),
            ("(415) 555", vec![a]), ("4155550100", vec![a]), ("+44 20", vec![b]), ("7946", vec![b]), ("zzz", vec![]),
        ] {
            let r = app.get(&ws.live, &format!("/api/v1/contacts?q={}", urlencode(q))).await;
            assert_eq!(r.status, 200, "{q}: {}", r.text);
            assert_eq!(ids(r.body.clone()), want, "q={q}");
            assert_eq!(r.body["total"], want.len(), "q={q}");
        }
        // Characters that mean something to FTS5 or LIKE are only text.
        for odd in ["\"", "\"\"\"", "a\"b\"c", "lo*", "NEAR(a b)", "%_%", "\\", "ana OR bo", "^lop", "ópez"] {
            let r = app.get(&ws.live, &format!("/api/v1/contacts?q={}", urlencode(odd))).await;
            assert_eq!(r.status, 200, "q={odd:?}: {}", r.text);
            assert_eq!(r.body["total"], 0, "q={odd:?}");
        }
        // NUL cannot be stored or searched: a 422, never a 500.
        let r = app.get(&ws.live, "/api/v1/contacts?q=%00abc").await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.string.nul")));
        let r = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "A\u{0}B", "metadata": {"k": "v\u{0}"}})).await;
        let types: Vec<&str> = r.body["detail"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!((r.status, types), (422, vec!["value_error.string.nul", "value_error.string.nul"]));
        assert_eq!(ids(app.get(&ws.live, "/api/v1/contacts?tag=vip").await.body), vec![c, a]);
        assert_eq!(ids(app.get(&ws.live, "/api/v1/contacts?tag=beta&q=cy").await.body), vec![c]);
        assert_eq!(ids(app.get(&ws.live, "/api/v1/contacts?origin=manual&limit=1").await.body), vec![c]);
        assert_eq!(app.get(&ws.live, "/api/v1/contacts?origin=import").await.body["total"], 0);
        assert_eq!(ids(app.get(&ws.live, &format!("/api/v1/contacts?updated_since={}", urlencode(&cut))).await.body), vec![c]);
        let r = app.get(&ws.live, "/api/v1/contacts?origin=nowhere&updated_since=soon&limit=0").await;
        assert_eq!(r.status, 422);
        let locs: Vec<Value> = r.body["detail"].as_array().unwrap().iter().map(|e| e["loc"].clone()).collect();
        assert!(locs.contains(&json!(["query", "origin"])) && locs.contains(&json!(["query", "updated_since"])) && locs.contains(&json!(["query", "limit"])), "{locs:?}");
    }

    async fn updates_keep_uniqueness_and_replace_identities(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let ana = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana", "phone": "+14155550100", "email": "ana@example.com"})).await.body;
        let bo = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Bo", "identities": [{"channel": "sms", "address": "+14155550111"}]})).await.body;
        let (a, b) = (ana["id"].as_i64().unwrap(), bo["id"].as_i64().unwrap());
        let r = app.patch(&ws.live, &format!("/api/v1/contacts/{b}"), json!({"phone": "415-555-0100"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Contact {a} already has the phone number +14155550100"))));
        // Its own values are no collision.
        let r = app.patch(&ws.live, &format!("/api/v1/contacts/{a}"), json!({"phone": "+1 415 555 0100", "display_name": "Ana  B"})).await;
        assert_eq!((r.status, r.body["canonical_name"].clone()), (200, json!("ana b")));
        let r = app.patch(&ws.live, &format!("/api/v1/contacts/{a}"), json!({"identities": [{"channel": "sms", "address": "(415) 555-0111"}]})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Contact {b} already has the identity sms:+14155550111"))));
        let r = app.patch(&ws.live, &format!("/api/v1/contacts/{a}"), json!({"email": null, "identities": [{"channel": "email", "address": "Ana@Work.example"}]})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!((r.body["normalized_email"].clone(), r.body["identities"].clone()), (Value::Null, json!([{"channel": "email", "address": "ana@work.example"}])));
        assert_eq!(app.events(ws.id, Mode::Live, "contact.updated").await.len(), 2);
        // Deleting frees the number.
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/contacts/{a}")).await.status, 204);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/contacts/{a}")).await.status, 404);
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/contacts/{a}")).await.status, 404);
        assert_eq!(app.patch(&ws.live, &format!("/api/v1/contacts/{b}"), json!({"phone": "+14155550100"})).await.status, 200);
        assert_eq!(count(&app, "SELECT COUNT(*) FROM contact_identities WHERE contact_id NOT IN (SELECT id FROM contacts)").await, 0);
    }

    async fn a_merge_moves_identities_fills_gaps_and_leaves_no_orphan(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let primary = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana", "phone": "+14155550100", "tags": ["vip"], "metadata": {"a": 1}})).await.body;
        let duplicate = app.post(&ws.live, "/api/v1/contacts", json!({
            "display_name": "Ana L", "email": "ana@example.com", "notes": "prefers email", "tags": ["beta", "vip"], "metadata": {"a": 2, "b": 3},
            "identities": [{"channel": "email", "address": "ana@example.com"}, {"channel": "telegram", "address": "ana_l"}],
        })).await.body;
        let (p, d) = (primary["id"].as_i64().unwrap(), duplicate["id"].as_i64().unwrap());
        let r = app.post(&ws.live, "/api/v1/contacts/merge", json!({"primary_id": p, "duplicate_id": d})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let m = &r.body;
        assert_eq!((m["id"].clone(), m["display_name"].clone(), m["normalized_phone"].clone()), (json!(p), json!("Ana"), json!("+14155550100")));
        assert_eq!((m["normalized_email"].clone(), m["notes"].clone()), (json!("ana@example.com"), json!("prefers email")));
        assert_eq!(m["tags"], json!(["vip", "beta"]));
        assert_eq!(m["metadata"], json!({"a": 1, "b": 3}));
        assert_eq!(m["identities"], json!([{"channel": "email", "address": "ana@example.com"}, {"channel": "telegram", "address": "ana_l"}]));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/contacts/{d}")).await.status, 404);
        assert_eq!(count(&app, "SELECT COUNT(*) FROM contact_identities WHERE contact_id NOT IN (SELECT id FROM contacts)").await, 0);
        assert_eq!(count(&app, "SELECT COUNT(*) FROM contacts").await, 1);
        let merged = app.events(ws.id, Mode::Live, "contact.merged").await;
        assert_eq!(merged.len(), 1);
        assert_eq!((merged[0].data["primary_id"].clone(), merged[0].data["duplicate_id"].clone()), (json!(p), json!(d)));

        // Refusals change nothing.
        let r = app.post(&ws.live, "/api/v1/contacts/merge", json!({"primary_id": p, "duplicate_id": p})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "duplicate_id"])));
        let r = app.post(&ws.live, "/api/v1/contacts/merge", json!({"primary_id": p, "duplicate_id": 999999})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (404, json!("Contact 999999 not found")));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/contacts/{p}")).await.body, *m);
    }

    async fn an_import_with_one_bad_row_writes_nothing(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let csv = "display_name,phone,email,notes,tags\n\
                   Ana,(415) 555-0100,ana@example.com,first,vip;beta\n\
                   Bo,not a phone,bo@example.com,,\n\
                   Cy,+44 20 7946 0958,cy@@example,,\n\
                   ,,,only notes,\n";
        let r = import(&app, &ws.live, csv.to_owned()).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let errors: Vec<(Value, Value)> = r.body["detail"].as_array().unwrap().iter().map(|e| (e["loc"].clone(), e["type"].clone())).collect();
        assert_eq!(errors, [
            (json!(["body", "rows", 2, "phone"]), json!("value_error.phone")),
            (json!(["body", "rows", 3, "email"]), json!("value_error.email")),
            (json!(["body", "rows", 4, "display_name"]), json!("value_error.missing")),
        ]);
        assert_eq!(app.get(&ws.live, "/api/v1/contacts").await.body["total"], 0);
        assert!(app.events(ws.id, Mode::Live, "contact.created").await.is_empty());

        // Bad headers, a ragged row, the wrong content type.
        let r = import(&app, &ws.live, "name,phone\nAna,+14155550100\n".into()).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "header", "name"])));
        let r = import(&app, &ws.live, "display_name,phone\nAna\n".into()).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.csv.columns")));
        let r = app.post(&ws.live, "/api/v1/contacts/import", json!({"rows": []})).await;
        assert_eq!(r.status, 415);
        let r = import(&app, &ws.live, "display_name,notes\nAna,bad\u{0}note\n".into()).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()), (422, json!(["body", "rows", 1, "notes"]), json!("value_error.string.nul")));

        // The good rows alone import; a second run updates and leaves the rest.
        let good = "display_name,phone,email,notes,tags\n\
                    Ana,(415) 555-0100,ana@example.com,first,vip;beta\n\
                    Bo,+1 212 555 0142,,,\n";
        let r = import(&app, &ws.live, good.into()).await;
        assert_eq!(r.body, json!({"created": 2, "updated": 0, "unchanged": 0}), "{}", r.text);
        let again = "email,phone,notes,tags\n\
                     ANA@example.com,,second,gold\n\
                     ,212-555-0142,,\n\
                     new@example.com,,,\n";
        let r = import(&app, &ws.live, again.into()).await;
        assert_eq!(r.body, json!({"created": 1, "updated": 1, "unchanged": 1}), "{}", r.text);
        let ana = &app.get(&ws.live, "/api/v1/contacts?q=ana").await.body["items"][0];
        assert_eq!((ana["notes"].clone(), ana["tags"].clone(), ana["origin"].clone()), (json!("second"), json!(["vip", "beta", "gold"]), json!("import")));
        // A row whose phone and email belong to two different contacts is refused.
        let r = import(&app, &ws.live, "phone,email\n+14155550100,new@example.com\n".into()).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.contact.conflict")));
    }

    async fn ten_thousand_rows_import_in_one_request(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let mut csv = String::from("display_name,phone,email,tags\n");
        for i in 0..10_000 {
            csv.push_str(&format!("Person {i},+1 415 {:03} {:04},person{i}@example.com,batch\n", 200 + i / 10_000, i % 10_000));
        }
        let r = import(&app, &ws.live, csv.clone()).await;
        assert_eq!(r.body, json!({"created": 10_000, "updated": 0, "unchanged": 0}), "{}", r.text);
        let page = app.get(&ws.live, "/api/v1/contacts?tag=batch&limit=1").await.body;
        assert_eq!(page["total"], 10_000);
        let r = app.get(&ws.live, "/api/v1/contacts?q=person9999@").await.body;
        assert_eq!((r["total"].clone(), r["items"][0]["normalized_phone"].clone()), (json!(1), json!("+14152009999")));
        let r = import(&app, &ws.live, csv).await;
        assert_eq!(r.body, json!({"created": 0, "updated": 0, "unchanged": 10_000}), "{}", r.text);
    }

    async fn inbound_addresses_resolve_to_contacts_or_discover_them(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let scope = Scope::new(ws.id, Mode::Live);
        let ana = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana", "phone": "+14155550100"})).await.body;
        let on = ContactsConfig::default();
        let off = ContactsConfig { auto_create: false, ..ContactsConfig::default() };
        let sms = Identity::parse(parley_domain::channel::ChannelType::Sms, "+1 415 555 0100", on.default_region).unwrap();
        let mut tx = app.db.begin().await.unwrap();
        // Matched by phone: the contact gains the sms identity.
        let found = contacts::resolve_address(&mut tx, scope, &off, &sms, Some("Someone")).await.unwrap().unwrap();
        assert_eq!(found.id, ana["id"].as_i64().unwrap());
        assert_eq!(found.identities, vec![sms.clone()]);
        // Unknown: nothing without auto-create, a discovered contact with it.
        let tg = Identity::parse(parley_domain::channel::ChannelType::Telegram, "98765", on.default_region).unwrap();
        assert!(contacts::resolve_address(&mut tx, scope, &off, &tg, None).await.unwrap().is_none());
        let new = contacts::resolve_address(&mut tx, scope, &on, &tg, Some("Bo")).await.unwrap().unwrap();
        assert_eq!((new.display_name.as_str(), new.origin), ("Bo", parley_domain::contact::Origin::Discovered));
        let again = contacts::resolve_address(&mut tx, scope, &on, &tg, Some("Bo")).await.unwrap().unwrap();
        assert_eq!(again.id, new.id);
        tx.commit().await.unwrap();
        assert_eq!(app.get(&ws.live, "/api/v1/contacts?origin=discovered").await.body["total"], 1);
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
