fn main() {
    let p = std::env::args().nth(1).unwrap_or_default();
    match baton::state::load_file(std::path::Path::new(&p)) {
        Ok(_) => println!("ok"),
        Err(e) => println!("{e}"),
    }
}
