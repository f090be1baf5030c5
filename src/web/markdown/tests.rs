use super::*;

#[test]
fn the_architecture_states_the_cache_size() {
    let doc = include_str!("../../../ARCHITECTURE.md");
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&format!("{} MiB of them", RENDERED_BYTES >> 20)));
}

#[test]
fn a_title_is_plain_and_cut_at_a_word() {
    assert_eq!(
        title("Which `billing` table?\n\nMore.", 90),
        "Which billing table?"
    );
    assert_eq!(
        title(
            "The **upgrade** of the schema went through staging today",
            30
        ),
        "The upgrade of the schema…"
    );
    assert_eq!(title("```\ncode first\n```", 30), "code first");
}

#[test]
fn a_body_that_would_render_huge_is_shown_as_written() {
    // One-cell rows under wide, aligned headers: each row padded.
    let header: String = (0..400).map(|_| "|h").collect::<String>() + "|\n";
    let rule: String = (0..400).map(|_| "|:-").collect::<String>() + "|\n";
    let table = header + &rule + &"|x|\n".repeat(40);
    let body = table.repeat(20);
    let body = &body[..body.len().min(64 * 1024)];
    let html = render(body);
    assert!(html.len() <= html_budget(body), "{}", html.len());
    assert!(
        html.starts_with("<pre class=\"as-written\">|h|h"),
        "{}",
        &html[..80]
    );
    // An ordinary table renders as one.
    let small = render("| a | b |\n|---|---|\n| 1 | 2 |\n");
    assert!(small.starts_with("<table>"), "{small}");
}

/// A table of `columns` headers over `rows` one-cell rows.
fn padded_table(columns: usize, rows: usize) -> String {
    "|h".repeat(columns) + "|\n" + &"|-".repeat(columns) + "|\n" + &"|x|\n".repeat(rows)
}

#[test]
fn a_table_bomb_is_counted_before_it_is_parsed() {
    // The attacker's body: wide headers over one-cell rows, 64 KiB of
    // them, which pulldown-cmark would pad to millions of cells.
    let bomb = padded_table(2000, 200).repeat(8);
    let bomb = &bomb[..64 * 1024];
    assert!(
        table_cells(bomb) > 10 * cell_budget(bomb),
        "{}",
        table_cells(bomb)
    );
    assert!(render(bomb).starts_with("<pre class=\"as-written\">"));
    // Its rows ended by lone carriage returns, as CommonMark ends lines too.
    let returns = padded_table(2000, 200).replace('\n', "\r");
    assert!(table_cells(&returns) > 10 * cell_budget(&returns));
    let both = padded_table(2000, 200).replace('\n', "\r\n");
    assert!(table_cells(&both) > 10 * cell_budget(&both));
    // In a quote or a list item it is counted all the same.
    let quoted: String = padded_table(300, 30)
        .lines()
        .map(|l| format!("> {l}\n"))
        .collect();
    assert!(table_cells(&quoted) > cell_budget(&quoted));
    let listed: String = padded_table(300, 30)
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect();
    assert!(table_cells(&format!("- item\n{listed}")) > cell_budget(&listed));
}

#[test]
fn real_tables_are_within_their_budget_and_render_as_tables() {
    // Dense, one-character cells: the most cells a byte can honestly make.
    let row = |c: &str| format!("|{}|\n", [c; 12].join("|"));
    let dense = row("a") + &row("-") + &row("1").repeat(4000);
    let dense = &dense[..dense.len().min(64 * 1024)];
    assert!(
        table_cells(dense) <= cell_budget(dense),
        "{}",
        table_cells(dense)
    );
    // Cells of words render as a table (their HTML within its budget).
    let words = row("name") + &row("----") + &row("word").repeat(1000);
    let words = &words[..words.len().min(64 * 1024)];
    assert!(render(words).starts_with("<table>"));
    // A blank line ends a table: prose after it is not counted as rows.
    let prose = padded_table(40, 2) + "\n" + &"Words, words and words.\n".repeat(2000);
    assert!(table_cells(&prose) < 200, "{}", table_cells(&prose));
}

#[test]
fn views_that_come_together_share_one_render() {
    let body = "# Shared\n\nA body only this test renders, by eight views at once.";
    let start = std::sync::Barrier::new(8);
    let htmls: Vec<Arc<str>> = std::thread::scope(|scope| {
        let views: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    render(body)
                })
            })
            .collect();
        views.into_iter().map(|v| v.join().unwrap()).collect()
    });
    assert!(htmls.iter().all(|html| Arc::ptr_eq(html, &htmls[0])));
    let first = RENDERED.lock().unwrap().cell(body);
    let again = RENDERED.lock().unwrap().cell(body);
    assert!(Arc::ptr_eq(&first, &again));
}

#[test]
fn raw_html_is_text() {
    let html = render("<script>alert(1)</script><img src=x onerror=alert(1)>");
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("&lt;script&gt;"), "{html}");
}

#[test]
fn only_web_and_mail_links_are_kept() {
    let html = render(
        "[a](javascript:alert(1)) [b](https://example.com/x?a=1&b=\"2\") <me@example.com> [c](data:text/html,x)",
    );
    assert!(!html.contains("javascript:"), "{html}");
    assert!(!html.contains("data:"), "{html}");
    assert!(
        html.contains(
            "<a href=\"https://example.com/x?a=1&amp;b=%222%22\" rel=\"noopener noreferrer nofollow\">b</a>"
        ),
        "{html}"
    );
    let quoted = render("[x](https://e.com/\"onmouseover='a')");
    assert!(!quoted.contains("\"onmouseover"), "{quoted}");
    assert!(html.contains("href=\"mailto:me@example.com\""), "{html}");
}

#[test]
fn images_are_links_never_loaded() {
    let html = render("![the graph](https://example.com/g.png)");
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("[image: the graph]</a>"), "{html}");
}

#[test]
fn long_code_blocks_fold_and_keep_their_text() {
    let code: String = (0..20).map(|i| format!("let x{i} = \"<b>\";\n")).collect();
    let html = render(&format!("```rust\n{code}```"));
    assert!(
        html.starts_with("<details class=\"code\"><summary>20 lines of rust</summary>"),
        "{html}"
    );
    assert!(
        html.contains("<code class=\"language-rust\">let x0 = &quot;&lt;b&gt;&quot;;"),
        "{html}"
    );
    assert!(!html.contains("```"));
    let short = render("```\nfn main() {}\n```");
    assert_eq!(
        &*short,
        "<pre tabindex=\"0\"><code>fn main() {}\n</code></pre>"
    );
}
