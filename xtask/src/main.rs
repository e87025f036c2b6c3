fn main() {
    eprintln!("xtask: not yet");
}
