//! docs/facts.md and the code cannot drift: the facts table must list exactly the facts of
//! `baton::facts::Fact::ALL`, in the same order, with the same type, nullability, scope and doc.

use baton::facts::{Fact, Scope};

const DOC: &str = "docs/facts.md";
const HEADER: &str = "| name | type | nullable | where | meaning |";

/// The `where` column for a scope.
fn scope_word(s: Scope) -> &'static str {
    match s {
        Scope::Thread => "anywhere",
        Scope::Run => "eligible",
        Scope::Item => "summary",
        Scope::Eligibility => "all but eligible",
        Scope::Summary => "stale, strategy, delivery, pregrant",
        Scope::Strategy => "delivery, pregrant",
        Scope::Delivery => "pregrant",
    }
}

#[derive(Debug)]
struct Row {
    line: usize,
    name: String,
    ty: String,
    nullable: String,
    scope: String,
    doc: String,
}

fn parse_table(text: &str) -> Vec<Row> {
    let mut lines = text.lines().enumerate();
    let Some(_) = lines.by_ref().find(|(_, l)| l.trim() == HEADER) else {
        panic!("{DOC}: no facts table (a line `{HEADER}`)");
    };
    // The separator line.
    let (_, sep) = lines.next().unwrap_or((0, ""));
    assert!(
        sep.trim_start().starts_with("|---") || sep.trim_start().starts_with("| ---"),
        "{DOC}: the facts table header must be followed by a `|---|` separator line"
    );
    let mut rows = Vec::new();
    for (i, l) in lines {
        let l = l.trim();
        if !l.starts_with('|') {
            break;
        }
        let inner = l.trim_start_matches('|');
        let inner = inner.strip_suffix('|').unwrap_or(inner);
        // The first four cells never contain `|`; the meaning takes the rest.
        let cells: Vec<&str> = inner.splitn(5, '|').map(str::trim).collect();
        assert_eq!(
            cells.len(),
            5,
            "{DOC}:{}: a facts row needs 5 cells (name, type, nullable, where, meaning): {l}",
            i + 1
        );
        rows.push(Row {
            line: i + 1,
            name: cells[0].trim_matches('`').to_string(),
            ty: cells[1].to_string(),
            nullable: cells[2].to_string(),
            scope: cells[3].to_string(),
            doc: cells[4].to_string(),
        });
    }
    rows
}

#[test]
fn facts_table_matches_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/facts.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {DOC}: {e}"));
    let rows = parse_table(&text);
    let mut problems: Vec<String> = Vec::new();

    for def in Fact::ALL {
        let Some(row) = rows.iter().find(|r| r.name == def.name) else {
            problems.push(format!(
                "`{}` is missing: add `| `{}` | {} | {} | {} | {} |`",
                def.name,
                def.name,
                def.ty.short_name(),
                if def.nullable { "yes" } else { "no" },
                scope_word(def.scope),
                def.doc
            ));
            continue;
        };
        let at = format!("{DOC}:{}: `{}`", row.line, def.name);
        if row.ty != def.ty.short_name() {
            problems.push(format!(
                "{at}: type is `{}` in the doc but `{}` in the code",
                row.ty,
                def.ty.short_name()
            ));
        }
        let nullable = if def.nullable { "yes" } else { "no" };
        if row.nullable != nullable {
            problems.push(format!(
                "{at}: nullable is `{}` in the doc but `{nullable}` in the code",
                row.nullable
            ));
        }
        if row.scope != scope_word(def.scope) {
            problems.push(format!(
                "{at}: where is `{}` in the doc but `{}` in the code (Scope::{:?})",
                row.scope,
                scope_word(def.scope),
                def.scope
            ));
        }
        if row.doc != def.doc {
            problems.push(format!(
                "{at}: meaning differs\n    doc:  {}\n    code: {}",
                row.doc, def.doc
            ));
        }
    }
    for row in &rows {
        let n = rows.iter().filter(|r| r.name == row.name).count();
        if Fact::by_name(&row.name).is_none() {
            problems.push(format!(
                "{DOC}:{}: `{}` is not a fact in the code (remove the row or add it to `facts!`)",
                row.line, row.name
            ));
        } else if n > 1
            && rows
                .iter()
                .position(|r| r.name == row.name)
                .map(|p| rows[p].line)
                != Some(row.line)
        {
            problems.push(format!(
                "{DOC}:{}: `{}` is listed twice",
                row.line, row.name
            ));
        }
    }
    if problems.is_empty() {
        let doc_order: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let code_order: Vec<&str> = Fact::ALL.iter().map(|d| d.name).collect();
        if let Some(i) = (0..code_order.len()).find(|&i| doc_order.get(i) != code_order.get(i)) {
            problems.push(format!(
                "{DOC}: rows are not in the order of `Fact::ALL`: row {} is `{}`, the code has `{}` there",
                i + 1,
                doc_order.get(i).unwrap_or(&"(none)"),
                code_order[i]
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{DOC} and `Fact::ALL` disagree ({} problem(s)):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}
