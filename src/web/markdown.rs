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
    sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError},
};

/// Code blocks longer than this are folded.
pub const COLLAPSE_LINES: usize = 15;

/// How much HTML a body may become: a small multiple of its length.
/// Markdown can expand far past it (a table pads every short row to its
/// header's width): past the bound the body is shown as it was written,
/// escaped.
pub fn html_budget(body: &str) -> usize {
    body.len().saturating_mul(4).saturating_add(4096)
}

/// How many table cells a body may make its parser build: about one a
/// byte. A real table's cells each take a few bytes to write; a padded
/// one takes none, so `|||…|` headers over one-cell rows would have
/// pulldown-cmark build millions of nodes (up to 2^18 a table) before its
/// first event, however little of it the page then shows.
fn cell_budget(body: &str) -> usize {
    body.len().saturating_add(4096)
}

/// At most how many table cells pulldown-cmark builds for `body`: every
/// line after a delimiter row (`|:-|-|`, in any container) is counted as
/// a row as wide as that row, until a blank line ends the table. It errs
/// only upwards (a line it takes for a delimiter row may be none), so a
/// body within [`cell_budget`] parses in time and memory proportional to
/// its length; the scan itself is one pass over the bytes.
fn table_cells(body: &str) -> usize {
    let mut width = 0usize;
    let mut cells = 0usize;
    // Lines as CommonMark ends them: at `\r\n`, `\n` or a lone `\r`.
    for line in body.replace("\r\n", "\n").split(['\n', '\r']) {
        // Containers' markers (quotes, indentation) come first in a line.
        let content = line.trim_start_matches(|c: char| c == '>' || c.is_whitespace());
        if content.is_empty() {
            width = 0;
            continue;
        }
        let pipes = content.bytes().filter(|&b| b == b'|').count();
        let delimiter_row = content.contains('-')
            && content
                .bytes()
                .all(|b| b"|:- \t*+.)".contains(&b) || b.is_ascii_digit());
        if delimiter_row {
            width = width.max(pipes + 1);
        }
        if width > 0 {
            // A row is padded to its table's width, or keeps its own cells.
            cells = cells.saturating_add(width.max(pipes + 1));
        }
    }
    cells
}

/// Bodies rendered lately, by their text: a body renders the same on every
/// page and fragment that shows it, so only its first showing pays, and
/// views that come together while it renders wait for that one render.
static RENDERED: LazyLock<Mutex<Rendered>> = LazyLock::new(Mutex::default);

/// What [`RENDERED`] may hold, bodies and their HTML together.
const RENDERED_BYTES: usize = 32 << 20;

/// A body's HTML, once rendered; those who find it rendering wait for it.
type Cell = Arc<OnceLock<Arc<str>>>;

#[derive(Default)]
struct Rendered {
    entries: HashMap<Arc<str>, Entry>,
    /// Oldest first, the next to go.
    order: VecDeque<Arc<str>>,
    bytes: usize,
}

struct Entry {
    cell: Cell,
    /// What this entry adds to [`Rendered::bytes`].
    bytes: usize,
}

/// What an entry of [`RENDERED`] costs beyond its text: the map's slot,
/// the order's, the cell, and the `Arc`s' counts.
const ENTRY_BYTES: usize = 96;

impl Rendered {
    /// The cell of `body`: the one being or already rendered, or a new one.
    fn cell(&mut self, body: &str) -> Cell {
        if let Some(entry) = self.entries.get(body) {
            return entry.cell.clone();
        }
        let body: Arc<str> = body.into();
        let cell = Cell::default();
        let bytes = body.len() + ENTRY_BYTES;
        self.entries.insert(
            body.clone(),
            Entry {
                cell: cell.clone(),
                bytes,
            },
        );
        self.order.push_back(body);
        self.grow(bytes);
        cell
    }

    /// Counts `html` as held by `body`'s entry, if it is still `cell`'s.
    fn rendered(&mut self, body: &str, cell: &Cell, html: usize) {
        if let Some(entry) = self.entries.get_mut(body)
            && Arc::ptr_eq(&entry.cell, cell)
        {
            entry.bytes += html;
            self.grow(html);
        }
    }

    /// Counts `size` more bytes held, and lets the oldest entries go until
    /// what is held fits (a render under way keeps its own cell).
    fn grow(&mut self, size: usize) {
        self.bytes += size;
        while self.bytes > RENDERED_BYTES
            && let Some(oldest) = self.order.pop_front()
        {
            if let Some(gone) = self.entries.remove(&oldest) {
                self.bytes -= gone.bytes;
            }
        }
    }
}

/// `body` as safe HTML (see [`render_uncached`]), from [`RENDERED`] when it
/// was rendered lately, or by the render another view has under way.
pub fn render(body: &str) -> Arc<str> {
    let cache = || RENDERED.lock().unwrap_or_else(PoisonError::into_inner);
    let cell = cache().cell(body);
    let mut rendered_here = false;
    let html = cell
        .get_or_init(|| {
            rendered_here = true;
            render_uncached(body).into()
        })
        .clone();
    if rendered_here {
        cache().rendered(body, &cell, html.len());
    }
    html
}

/// `body` as safe HTML, at most [`html_budget`] bytes of it (past that,
/// or when its tables would take more than [`cell_budget`] cells to parse,
/// the body as escaped preformatted text, which is bounded by its length).
fn render_uncached(body: &str) -> String {
    if table_cells(body) > cell_budget(body) {
        return as_written(body);
    }
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
mod tests;
