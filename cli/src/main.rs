fn main() {
    std::process::exit(pi_cli::run());
}
