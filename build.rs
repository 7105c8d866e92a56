//! Rebuild when a migration is added: `sqlx::migrate!` embeds the
//! directory's files but only tracks the ones it saw last time.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
