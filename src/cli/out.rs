//! Printing to stdout for every command: a closed pipe (`baton explain | head`) ends the
//! output quietly instead of panicking the way `println!` would.

macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

/// Between the documents of a multi-document YAML stream.
pub(crate) fn print_doc_separator() {
    outln!("---");
}
