//! Message bodies as Markdown, made safe to put in a page.
//!
//! pulldown-cmark parses; this module decides what may reach the page:
//! - raw HTML (a block or inline) is shown as text, never interpreted;
//! - links keep only `http`, `https` and `mailto` destinations, and get
//!   `rel="noopener noreferrer nofollow"`; any other link is its text alone;
//! - images are never loaded: an image becomes a link to it, by its alt text;
//! - code blocks are monospace and scroll sideways; past
//!   [`COLLAPSE_LINES`] lines they are folded in a `<details>`.
//!
//! Everything else is pulldown-cmark's own HTML, which escapes all text.

use pulldown_cmark::{CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd, html};
use pulldown_cmark_escape::{escape_href, escape_html};
use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, LazyLock, Mutex, PoisonError},
};

/// Code blocks longer than this are folded.
pub const COLLAPSE_LINES: usize = 15;

/// How much HTML a body may become: a small multiple of its length.
/// Markdown can expand far past it (a table pads every short row to its
/// header's width, and pulldown-cmark caps that per table, not per body):
/// past the bound the body is shown as it was written, escaped.
pub fn html_budget(body: &str) -> usize {
    body.len().saturating_mul(4).saturating_add(4096)
}

/// Bodies rendered lately, by their text: a body renders the same on every
/// page and fragment that shows it, so only its first showing pays.
static RENDERED: LazyLock<Mutex<Rendered>> = LazyLock::new(Mutex::default);

/// What [`RENDERED`] may hold, bodies and their HTML together.
const RENDERED_BYTES: usize = 32 << 20;

#[derive(Default)]
struct Rendered {
    html: HashMap<Arc<str>, Arc<str>>,
    /// Oldest first, the next to go.
    order: VecDeque<Arc<str>>,
    bytes: usize,
}

/// What an entry of [`RENDERED`] costs beyond its text: the map's slot,
/// the order's, and the two `Arc`s' counts.
const ENTRY_BYTES: usize = 64;

impl Rendered {
    fn insert(&mut self, body: Arc<str>, html: Arc<str>) {
        if self.html.contains_key(&body) {
            return; // rendered meanwhile by another request
        }
        let size = body.len() + html.len() + ENTRY_BYTES;
        while self.bytes + size > RENDERED_BYTES
            && let Some(oldest) = self.order.pop_front()
        {
            if let Some(gone) = self.html.remove(&oldest) {
                self.bytes -= oldest.len() + gone.len() + ENTRY_BYTES;
            }
        }
        self.html.insert(body.clone(), html);
        self.order.push_back(body);
        self.bytes += size;
    }
}

/// `body` as safe HTML (see [`render_uncached`]), from [`RENDERED`] when it
/// was rendered lately.
pub fn render(body: &str) -> Arc<str> {
    let cache = || RENDERED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(html) = cache().html.get(body) {
        return html.clone();
    }
    let html: Arc<str> = render_uncached(body).into();
    cache().insert(body.into(), html.clone());
    html
}

/// `body` as safe HTML, at most [`html_budget`] bytes of it (past that,
/// the body as escaped preformatted text, which is bounded by its length).
fn render_uncached(body: &str) -> String {
    let mut html = Budgeted {
        html: String::with_capacity(body.len() * 3 / 2),
        left: html_budget(body),
    };
    match html::write_html_fmt(&mut html, safe_events(body)) {
        Ok(()) => html.html,
        Err(_) => as_written(body),
    }
}

/// The body as written: escaped, preformatted, wrapped.
pub fn as_written(body: &str) -> String {
    let mut escaped = String::with_capacity(body.len() + 32);
    let _ = escape_html(&mut escaped, body);
    format!("<pre class=\"as-written\">{escaped}</pre>")
}

/// A `fmt::Write` that refuses to grow past its budget, so a body that
/// would render huge stops rendering at once instead of at the end.
struct Budgeted {
    html: String,
    left: usize,
}

impl std::fmt::Write for Budgeted {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.left = self.left.checked_sub(s.len()).ok_or(std::fmt::Error)?;
        self.html.push_str(s);
        Ok(())
    }
}

/// pulldown-cmark's events for `body`, with everything that may not reach
/// the page turned into what may (see the module's notes), one at a time.
fn safe_events(body: &str) -> impl Iterator<Item = Event<'_>> {
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    // Inside an image: its alt text is gathered, not rendered.
    let mut image: Option<(String, String)> = None;
    // Inside a code block: its language and text, rendered at its end.
    let mut code: Option<(String, String)> = None;
    // Per open link: whether it was kept (so its end closes an <a>).
    let mut links: Vec<bool> = Vec::new();
    Parser::new_ext(body, options).filter_map(move |event| {
        if let Some((_, text)) = &mut code {
            return match event {
                Event::Text(t) => {
                    text.push_str(&t);
                    None
                }
                Event::End(TagEnd::CodeBlock) => {
                    let (language, text) = code.take().unwrap_or_default();
                    Some(Event::Html(code_block(&language, &text).into()))
                }
                _ => None,
            };
        }
        if let Some((_, alt)) = &mut image {
            return match event {
                Event::End(TagEnd::Image) => {
                    let (url, alt) = image.take().unwrap_or_default();
                    let label = if alt.is_empty() {
                        "image".to_owned()
                    } else {
                        alt
                    };
                    Some(Event::Html(
                        link_to(&url, &format!("[image: {label}]")).into(),
                    ))
                }
                Event::Text(t) | Event::Code(t) => {
                    alt.push_str(&t);
                    None
                }
                _ => None,
            };
        }
        match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
            Event::Start(Tag::CodeBlock(kind)) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                code = Some((language, String::new()));
                None
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                image = Some((dest_url.to_string(), String::new()));
                None
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) => {
                let kept = allowed(&dest_url, link_type);
                links.push(kept);
                kept.then(|| {
                    let url = if link_type == LinkType::Email {
                        format!("mailto:{dest_url}")
                    } else {
                        dest_url.to_string()
                    };
                    Event::Html(open_link(&url).into())
                })
            }
            Event::End(TagEnd::Link) => links
                .pop()
                .unwrap_or(false)
                .then_some(Event::Html(CowStr::Borrowed("</a>"))),
            other => Some(other),
        }
    })
}

/// The first block of `body` as plain text (no markup), at most about
/// `max` characters, cut at a word with an ellipsis: a title for it.
pub fn title(body: &str, max: usize) -> String {
    let mut text = String::new();
    for event in Parser::new_ext(body, Options::ENABLE_STRIKETHROUGH) {
        match event {
            // Raw HTML is text here too (the page escapes it).
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                text.push_str(&t)
            }
            Event::SoftBreak | Event::HardBreak => text.push(' '),
            Event::End(
                TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock | TagEnd::Item,
            ) if !text.trim().is_empty() => {
                break;
            }
            _ => {}
        }
    }
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max).collect();
    let at_word = cut
        .rsplit_once(' ')
        .map_or(cut.as_str(), |(words, _)| words);
    format!("{}…", at_word.trim_end_matches([',', ';', ':', '.', ' ']))
}

/// Whether a link's destination may be followed from the page.
fn allowed(url: &str, link_type: LinkType) -> bool {
    if matches!(link_type, LinkType::Email) {
        return true;
    }
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    matches!(scheme.as_deref(), Some("http" | "https" | "mailto"))
}

/// An opening `<a>`: `escape_href` leaves nothing that could end the
/// attribute (it encodes quotes, escapes `&` and `'`).
fn open_link(url: &str) -> String {
    let mut href = String::new();
    let _ = escape_href(&mut href, url);
    format!("<a href=\"{href}\" rel=\"noopener noreferrer nofollow\">")
}

/// A link to `url` reading `text`, or the text alone if `url` is not kept.
fn link_to(url: &str, text: &str) -> String {
    let mut shown = String::new();
    let _ = escape_html(&mut shown, text);
    if allowed(url, LinkType::Inline) {
        format!("{}{shown}</a>", open_link(url))
    } else {
        shown
    }
}

fn code_block(language: &str, text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 16);
    let _ = escape_html(&mut escaped, text);
    let mut label = String::new();
    let _ = escape_html(&mut label, language);
    let class = if label.is_empty() {
        String::new()
    } else {
        format!(" class=\"language-{label}\"")
    };
    let block = format!("<pre tabindex=\"0\"><code{class}>{escaped}</code></pre>");
    let lines = text.trim_end_matches('\n').lines().count();
    if lines > COLLAPSE_LINES {
        let what = if label.is_empty() {
            "code".to_owned()
        } else {
            label
        };
        format!(
            "<details class=\"code\"><summary>{lines} lines of {what}</summary>{block}</details>"
        )
    } else {
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_architecture_states_the_cache_size() {
        let doc = include_str!("../../ARCHITECTURE.md");
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
}
