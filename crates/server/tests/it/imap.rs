//! Email by IMAP against a real server: a throwaway Dovecot (Debian's
//! dovecot-imapd) with one Maildir, configured by the test
//! (tests/email/dovecot.conf.template), serving IMAPS with the test CA.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::email::{Certs, email_channel, free_port};
use crate::runtime::eventually;
use crate::support::*;

const USER: &str = "parley@example.test";

struct Dovecot {
    dir: PathBuf,
    port: u16,
    tls_port: u16,
    child: Child,
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        // Its processes share a group: stop them all at once.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Dovecot {
    fn start(certs: &Certs) -> Dovecot {
        let dir = std::env::temp_dir().join(format!("parley-dovecot-{}", uuid()));
        let maildir = dir.join("mail").join(USER);
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(maildir.join(sub)).unwrap();
        }
        // Mail is read as uid 65534; the directories must let it in.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).unwrap();
        for d in [dir.join("mail"), maildir.clone(), maildir.join("cur"), maildir.join("new"), maildir.join("tmp")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        std::fs::write(dir.join("passwd"), format!("{USER}:{{PLAIN}}s3cret\n")).unwrap();
        let (port, tls_port) = (free_port(), free_port());
        let template =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/email/dovecot.conf.template")).unwrap();
        let config = template
            .replace("{DIR}", &dir.display().to_string())
            .replace("{PORT}", &port.to_string())
            .replace("{TLS_PORT}", &tls_port.to_string())
            .replace("{CERT}", &certs.dir.join("leaf.pem").display().to_string())
            .replace("{KEY}", &certs.dir.join("leaf.key").display().to_string());
        std::fs::write(dir.join("dovecot.conf"), config).unwrap();
        let mut child = Command::new("dovecot")
            .args(["-F", "-c"])
            .arg(dir.join("dovecot.conf"))
            .process_group(0)
            .spawn()
            .expect("dovecot runs (apt-get install dovecot-imapd)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "dovecot exited: {}",
                std::fs::read_to_string(dir.join("dovecot.log")).unwrap_or_default()
            );
            assert!(Instant::now() < deadline, "dovecot did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Dovecot { dir, port, tls_port, child }
    }

    /// Delivers a message into the mailbox as an MTA would (tmp, then new).
    fn deliver(&self, name: &str, raw: &str) {
        let maildir = self.dir.join("mail").join(USER);
        let tmp = maildir.join("tmp").join(name);
        std::fs::write(&tmp, raw.replace('\n', "\r\n")).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&tmp, maildir.join("new").join(name)).unwrap();
    }

    /// The flags Dovecot keeps on a delivered message (its name in cur/).
    fn flags(&self, name: &str) -> Option<String> {
        let cur = self.dir.join("mail").join(USER).join("cur");
        std::fs::read_dir(cur).ok()?.flatten().find_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            file.strip_prefix(&format!("{name}:2,")).map(str::to_owned)
        })
    }
}

fn mail(id: &str, text: &str) -> String {
    format!(
        "From: Ana <ana@customer.example>\nTo: {USER}\nSubject: Order {id}\nMessage-ID: <{id}@customer.example>\n\
        Date: Tue, 24 Nov 2026 09:00:00 +0000\nContent-Type: text/plain; charset=utf-8\n\n{text}\n"
    )
}

both_backends! {
    async fn an_imap_mailbox_is_read_over_tls_new_mail_arrives_by_idle_and_is_marked_seen(backend) {
        let certs = Certs::new();
        let dovecot = Dovecot::start(&certs);
        // Already there before the channel: unread, so taken.
        dovecot.deliver("1700000000.M1.parley", &mail("m1", "Is my order on its way?"));
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let (id, _) = email_channel(&app, &ws.live, json!({
            "address": USER, "imap_host": "127.0.0.1", "imap_port": dovecot.tls_port, "imap_security": "tls",
            "imap_username": USER, "imap_password": "s3cret", "tls_ca_pem": certs.ca_pem()})).await;

        let conversation = eventually("the unread message was taken", || async {
            let c = app.get(&ws.live, "/api/v1/conversations?channel=email").await.body;
            c["items"].as_array().unwrap().first().cloned()
        }).await;
        assert_eq!(conversation["channel_ref"], "email:ana@customer.example");
        let path = format!("/api/v1/conversations/{}/messages", conversation["id"]);
        let messages = || app.get(&ws.live, &path);
        assert_eq!(messages().await.body["items"][0]["text"], "Is my order on its way?");
        eventually("the message was marked seen", || async { dovecot.flags("1700000000.M1.parley").filter(|f| f.contains('S')) }).await;

        // New mail while Parley waits in IDLE: taken within seconds, not at the end of the wait.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let delivered = Instant::now();
        dovecot.deliver("1700000001.M2.parley", &mail("m2", "Hello again"));
        eventually("the new message was taken", || async {
            (messages().await.body["total"].as_i64().unwrap() >= 2).then_some(())
        }).await;
        let took = delivered.elapsed();
        assert!(took < Duration::from_secs(8), "IDLE brought the message in {took:?} (the wait is 20 s)");
        let texts: Vec<_> = messages().await.body["items"].as_array().unwrap().iter().map(|m| m["text"].clone()).collect();
        assert_eq!(texts, vec![json!("Is my order on its way?"), json!("Hello again")], "each once, in order");
        let channel = app.get(&ws.live, &format!("/api/v1/channels/{id}")).await.body;
        assert_eq!(channel["status"], "active", "{channel}");

        // A wrong password: the check says so and the channel goes to error.
        let (wrong, _) = email_channel(&app, &ws.live, json!({
            "address": USER, "imap_host": "127.0.0.1", "imap_port": dovecot.port, "imap_security": "none",
            "imap_password": "nope"})).await;
        let r = app.post(&ws.live, &format!("/api/v1/channels/{wrong}/check"), json!({})).await;
        assert_eq!((r.body["ok"].clone(), r.body["channel"]["status"].clone()), (json!(false), json!("error")), "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().contains("IMAP login refused"), "{}", r.text);
    }
}
