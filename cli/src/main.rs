fn main() {
    println!("pi");
}
