//! Commands suggested in error messages, written so that they can be pasted into a shell:
//! every argument the message knows (`--db`, `--thread`, `--run`) is given, quoted when it
//! needs to be, and only what it cannot know is a placeholder in capitals (`ITEMS_FILE`).

/// `arg` as one shell word: unchanged when it holds only characters no shell treats
/// specially, else in single quotes (a `'` inside written as `'\''`).
pub fn sh(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::sh;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(sh("baton.db"), "baton.db");
        assert_eq!(sh("/tmp/my dbs/b.db"), "'/tmp/my dbs/b.db'");
        assert_eq!(sh("it's"), r"'it'\''s'");
        assert_eq!(sh(""), "''");
    }
}
