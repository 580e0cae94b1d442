//! Building HTML, with escaping as a type: a page is [`Markup`], and markup is made only here —
//! by [`esc`] (text made safe), by [`markup!`] (a template written in the source whose every
//! `{}` is filled with text escaped on the way in, numbers, or other markup), by
//! [`Markup::literal`] (a `&'static str` in the source) and by the widgets below. A `String`
//! from the API does not compile where markup is expected, so no page can forget to escape.
//! Times are UTC on the server, turned into the viewer's zone by the script (UTC kept in the
//! `title`). This module knows nothing of sessions: the page frame with its navigation lives
//! in `frame.rs`.

use axum::response::{Html, IntoResponse, Response};

use super::i18n::{Lang, t, tf};

/// [`t`](super::i18n::t) as markup, each `{}` filled with the next of `args` (text escaped, markup kept as is):
/// for a sentence with a link, a time or code inside. The tables are the console's own text.
pub fn tm(lang: Lang, key: &'static str, args: &[&dyn Render]) -> Markup {
    Markup::fill(t(lang, key), args)
}

/// HTML that is safe to put in a page (see the module comment for who makes it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Markup(String);

impl Markup {
    pub fn new() -> Markup {
        Markup(String::new())
    }

    /// Markup written in the source as a literal: nothing from outside can be in it.
    pub fn literal(html: &'static str) -> Markup {
        Markup(html.to_string())
    }

    pub fn push(&mut self, more: Markup) {
        self.0.push_str(&more.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[cfg(test)]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// What [`markup!`] calls: `template` with each `{}` replaced by the next argument.
    #[doc(hidden)]
    pub fn fill(template: &'static str, args: &[&dyn Render]) -> Markup {
        let mut out = String::with_capacity(template.len() + 24 * args.len());
        let mut args = args.iter();
        let mut rest = template;
        while let Some(at) = rest.find("{}") {
            out.push_str(&rest[..at]);
            if let Some(arg) = args.next() {
                arg.render_to(&mut out);
            }
            rest = &rest[at + 2..];
        }
        out.push_str(rest);
        Markup(out)
    }
}

impl FromIterator<Markup> for Markup {
    fn from_iter<I: IntoIterator<Item = Markup>>(pieces: I) -> Markup {
        let mut out = Markup::new();
        for piece in pieces {
            out.push(piece);
        }
        out
    }
}

/// What may fill a [`markup!`] template's `{}`: text (escaped), numbers, and markup (as is).
pub trait Render {
    fn render_to(&self, out: &mut String);
}

impl Render for str {
    fn render_to(&self, out: &mut String) {
        escape_into(self, out);
    }
}

impl Render for String {
    fn render_to(&self, out: &mut String) {
        escape_into(self, out);
    }
}

impl Render for Markup {
    fn render_to(&self, out: &mut String) {
        out.push_str(&self.0);
    }
}

impl<T: Render + ?Sized> Render for &T {
    fn render_to(&self, out: &mut String) {
        (**self).render_to(out);
    }
}

macro_rules! render_numbers {
    ($($number:ty),*) => {$(
        impl Render for $number {
            fn render_to(&self, out: &mut String) {
                out.push_str(&self.to_string());
            }
        }
    )*};
}
render_numbers!(i32, i64, u32, u64, usize, bool);

/// The number of `{}` in a template; a `{` that does not open `{}` is refused while compiling,
/// so a `{name}` capture (which would skip the escaping) cannot slip in.
#[doc(hidden)]
pub const fn placeholders(template: &str) -> usize {
    let bytes = template.as_bytes();
    let mut count = 0;
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'{' {
            assert!(
                at + 1 < bytes.len() && bytes[at + 1] == b'}',
                "markup! templates take only {{}} placeholders"
            );
            count += 1;
            at += 2;
        } else {
            at += 1;
        }
    }
    count
}

/// `markup!("<td>{}</td>", value)`: a template from the source, each `{}` filled through
/// [`Render`] (text is escaped). The count of `{}` and of arguments is checked while compiling.
macro_rules! markup {
    ($template:literal $(, $arg:expr)* $(,)?) => {{
        const _: () = assert!(
            $crate::console::html::placeholders($template) == 0 $(+ { let _ = stringify!($arg); 1 })*,
            "markup!: as many arguments as {{}} in the template"
        );
        $crate::console::html::Markup::fill(
            $template,
            &[$(&$arg as &dyn $crate::console::html::Render),*],
        )
    }};
}
pub(crate) use markup;

fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
}

/// Text made safe for HTML content and quoted attributes.
pub fn esc(text: &str) -> Markup {
    let mut out = String::with_capacity(text.len());
    escape_into(text, &mut out);
    Markup(out)
}

/// Percent-encodes a value for a URL query (still text: it is escaped where it is put).
pub fn url(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A whole HTML document in a language (its `lang` attribute and skip link): head, `header`
/// (navigation, or nothing on error and login pages), the title as the page's heading, then
/// `body`.
pub fn document_in(lang: Lang, title: &str, header: Markup, body: Markup) -> Response {
    let page = markup!(
        "<!doctype html><html lang=\"{}\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · xjob</title><link rel=\"stylesheet\" href=\"/assets/console.css\">\
         <script src=\"/assets/live.js\" defer></script>\
         <script src=\"/assets/console.js\" defer></script></head><body>\
         <a class=\"skip\" href=\"#main\">{}</a>{}\
         <main id=\"main\"><h1>{}</h1>{}</main></body></html>",
        lang.html_lang(),
        title,
        t(lang, "frame.skip"),
        header,
        title,
        body
    );
    Html(page.into_string()).into_response()
}

/// A time: UTC text (with UTC in the title), turned into the viewer's zone by the script.
pub fn time(ms: i64) -> Markup {
    if ms <= 0 {
        return Markup::literal("<span class=\"muted\">–</span>");
    }
    let utc = utc_text(ms);
    markup!("<time data-ms=\"{}\" title=\"{}\">{}</time>", ms, utc, utc)
}

pub fn utc_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|at| at.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// A duration for people: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h` (in `lang`).
pub fn duration(lang: Lang, ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1_000 => tf(lang, "time.ms", &[&ms]),
        1_000..60_000 => tf(lang, "time.s", &[&format!("{:.1}", ms as f64 / 1000.0)]),
        60_000..3_600_000 => tf(lang, "time.min_s", &[&(ms / 60_000), &(ms % 60_000 / 1000)]),
        3_600_000..86_400_000 => tf(
            lang,
            "time.h_min",
            &[&(ms / 3_600_000), &(ms % 3_600_000 / 60_000)],
        ),
        _ => tf(
            lang,
            "time.d_h",
            &[&(ms / 86_400_000), &(ms % 86_400_000 / 3_600_000)],
        ),
    }
}

/// One `<option>` of a [`select`]: the value posted and the label shown.
pub type Choice = (String, String);

/// The choices of a protobuf enum, from the enum itself: `name_of` gives each value's name
/// (prost's `as_str_name`), shown without `prefix` (`ROUTE_STRATEGY_FIRST` → `FIRST`), in
/// declaration order; `*_UNSPECIFIED` (0) is left out, and so is any name in `except`.
pub fn enum_choices(
    prefix: &str,
    name_of: impl Fn(i32) -> Option<&'static str>,
    except: &[&str],
) -> Vec<Choice> {
    (1..)
        .map_while(&name_of)
        .map(|name| enum_label(name, prefix))
        .filter(|label| !except.contains(&label.as_str()))
        .map(|label| (label.clone(), label))
        .collect()
}

/// A `<select>` over `(value, label)` options with `selected` chosen; `id` defaults to `name`.
pub fn select(name: &str, options: &[Choice], selected: &str) -> Markup {
    select_with_id(name, name, options, selected)
}

/// A `<select>` whose id differs from its name (two forms on one page post the same name).
pub fn select_with_id(name: &str, id: &str, options: &[Choice], selected: &str) -> Markup {
    let mut out = markup!("<select name=\"{}\" id=\"{}\">", name, id);
    for (value, label) in options {
        let chosen = if value == selected {
            Markup::literal(" selected")
        } else {
            Markup::new()
        };
        out.push(markup!(
            "<option value=\"{}\"{}>{}</option>",
            value,
            chosen,
            label
        ));
    }
    out.push(Markup::literal("</select>"));
    out
}

/// A labelled field with its error (from the API) right below it.
pub fn field(label: &str, name: &str, input: Markup, error: Option<&str>, hint: Markup) -> Markup {
    let error = match error {
        Some(message) => markup!(
            "<div class=\"error\" id=\"err-{}\" role=\"alert\">{}</div>",
            name,
            message
        ),
        None => markup!("<div class=\"error\" id=\"err-{}\" hidden></div>", name),
    };
    let hint = if hint.is_empty() {
        hint
    } else {
        markup!("<div class=\"hint\">{}</div>", hint)
    };
    markup!(
        "<div class=\"field\"><label for=\"{}\">{}</label>{}{}{}</div>",
        name,
        label,
        input,
        hint,
        error
    )
}

pub fn text_input(name: &str, value: &str) -> Markup {
    markup!(
        "<input type=\"text\" name=\"{}\" id=\"{}\" value=\"{}\">",
        name,
        name,
        value
    )
}

/// A multi-line text field.
pub fn textarea(name: &str, rows: u32, value: &str) -> Markup {
    markup!(
        "<textarea name=\"{}\" id=\"{}\" rows=\"{}\" spellcheck=\"false\">{}</textarea>",
        name,
        name,
        rows,
        value
    )
}

/// A script's text area, which `editor.js` (loaded here, `defer`: it runs once the page is
/// parsed) turns into a code editor for `lang` (`shell`, `python`, `nodejs`, `php`,
/// `powershell`; empty: the form's glue type). Without the script it stays a text area.
pub fn code_textarea(name: &str, rows: u32, value: &str, lang: &str) -> Markup {
    markup!(
        "<textarea name=\"{}\" id=\"{}\" rows=\"{}\" spellcheck=\"false\" \
         autocapitalize=\"off\" autocomplete=\"off\" data-code=\"{}\">{}</textarea>\
         <script src=\"/assets/editor.js\" defer></script>",
        name,
        name,
        rows,
        lang,
        value
    )
}

/// The readable part of a protobuf enum name: `RUN_STATUS_SUCCESS` → `SUCCESS`.
pub fn enum_label(full: &str, prefix: &str) -> String {
    full.strip_prefix(prefix).unwrap_or(full).to_string()
}

/// A status badge.
pub fn badge(text: &str) -> Markup {
    markup!(
        "<span class=\"badge s-{}\">{}</span>",
        text.to_ascii_lowercase(),
        text
    )
}

/// A message box (notice or error) shown above a page's content.
pub fn notice(kind: Tone, message: &str) -> Markup {
    if message.is_empty() {
        return Markup::new();
    }
    let class = match kind {
        Tone::Ok => "ok",
        Tone::Bad => "bad",
    };
    markup!(
        "<div class=\"notice {}\" role=\"status\">{}</div>",
        class,
        message
    )
}

/// A notice's tone.
#[derive(Clone, Copy)]
pub enum Tone {
    Ok,
    Bad,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>").as_str(),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn templates_escape_text_and_keep_markup() {
        let cell = markup!(
            "<td title=\"{}\">{}{}</td>",
            "a\"b",
            String::from("<script>"),
            Markup::literal("<b>ok</b>")
        );
        assert_eq!(
            cell.as_str(),
            "<td title=\"a&quot;b\">&lt;script&gt;<b>ok</b></td>"
        );
        assert_eq!(
            markup!("<p>{} of {}</p>", 3_i64, 7_usize).as_str(),
            "<p>3 of 7</p>"
        );
    }

    #[test]
    fn durations_read_like_people_write_them() {
        let en = Lang::En;
        assert_eq!(duration(en, 850), "850 ms");
        assert_eq!(duration(en, 4_200), "4.2 s");
        assert_eq!(duration(en, 185_000), "3 min 5 s");
        assert_eq!(duration(en, 7_800_000), "2 h 10 min");
        assert_eq!(duration(en, 3 * 86_400_000 + 4 * 3_600_000), "3 d 4 h");
        assert_eq!(duration(Lang::Zh, 185_000), "3 分 5 秒");
    }

    #[test]
    fn times_keep_utc_in_the_title() {
        let html = time(0);
        assert!(html.as_str().contains('–'));
        let html = time(1_700_000_000_000);
        assert!(
            html.as_str().contains("title=\"2023-11-14 22:13:20 UTC\""),
            "{html:?}"
        );
        assert!(html.as_str().contains("data-ms=\"1700000000000\""));
    }
}
