//! The `skilld` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    skilld::cli::main()
}
