// `sqlx::migrate!` embeds the migrations at compile time: a new or edited
// migration file must rebuild this crate even when no Rust source changed.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
