//! Building HTML: escaping (every value from the API goes through [`esc`]), the page frame,
//! times (UTC on the server, the viewer's zone by the script, UTC kept in the `title`),
//! durations and form widgets. Plain `format!` builders: no template engine to learn.

use std::fmt::Write;

use axum::response::{Html, IntoResponse, Response};

use super::session::Viewer;

/// Escapes text for HTML content and quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
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
    out
}

/// Percent-encodes a value for a URL query.
pub fn url(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Which navigation entry a page belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Dashboard,
    Jobs,
    Runs,
    Executors,
    Users,
    Audit,
    None,
}

/// A whole page: head, navigation (by what the viewer may see), the open-console banner,
/// then `body`.
pub fn page(viewer: Option<&Viewer>, title: &str, nav: Nav, body: &str) -> Response {
    let mut out = String::with_capacity(body.len() + 2048);
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · xjob</title><link rel=\"stylesheet\" href=\"/assets/console.css\">\
         <script src=\"/assets/console.js\" defer></script></head><body>",
        esc(title)
    );
    if let Some(viewer) = viewer {
        out.push_str("<header class=\"top\"><a class=\"brand\" href=\"/\">xjob</a><nav>");
        let mut entries = vec![
            (Nav::Dashboard, "/", "Dashboard"),
            (Nav::Jobs, "/jobs", "Jobs"),
            (Nav::Runs, "/runs", "Runs"),
            (Nav::Executors, "/executors", "Executors"),
        ];
        if viewer.is_admin() && !viewer.is_open() {
            entries.push((Nav::Users, "/users", "Users"));
        }
        if viewer.is_admin() {
            entries.push((Nav::Audit, "/audit", "Audit"));
        }
        for (entry, href, label) in entries {
            let current = if entry == nav {
                " aria-current=\"page\""
            } else {
                ""
            };
            let _ = write!(out, "<a href=\"{href}\"{current}>{label}</a>");
        }
        out.push_str("</nav><div class=\"who\">");
        if viewer.is_open() {
            out.push_str("<span>open console</span>");
        } else {
            let _ = write!(
                out,
                "<span>{}</span><form method=\"post\" action=\"/logout\">{}\
                 <button class=\"link\" id=\"logout\">Log out</button></form>",
                esc(viewer.name()),
                csrf_field(viewer)
            );
        }
        out.push_str("</div></header>");
        if viewer.is_open() {
            out.push_str(
                "<div class=\"banner\" id=\"open-banner\">No users exist yet, so this console \
                 (on a loopback admin) needs no login and everyone who reaches it acts as an \
                 admin. Create the first admin with <code>xjob user create --role admin \
                 --password-stdin NAME</code> before exposing it.</div>",
            );
        }
    }
    let _ = write!(
        out,
        "<main><h1>{}</h1>{body}</main></body></html>",
        esc(title)
    );
    Html(out).into_response()
}

/// The hidden CSRF field every form carries.
pub fn csrf_field(viewer: &Viewer) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(&viewer.csrf)
    )
}

/// A time: UTC text (with UTC in the title), turned into the viewer's zone by the script.
pub fn time(ms: i64) -> String {
    if ms <= 0 {
        return "<span class=\"muted\">–</span>".to_string();
    }
    let utc = utc_text(ms);
    format!("<time data-ms=\"{ms}\" title=\"{utc}\">{utc}</time>")
}

pub fn utc_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|at| at.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// A duration for people: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
        3_600_000..86_400_000 => format!("{} h {} min", ms / 3_600_000, ms % 3_600_000 / 60_000),
        _ => format!("{} d {} h", ms / 86_400_000, ms % 86_400_000 / 3_600_000),
    }
}

/// A `<select>` over `(value, label)` options with `selected` chosen.
pub fn select(name: &str, options: &[(String, String)], selected: &str) -> String {
    let mut out = format!("<select name=\"{name}\" id=\"{name}\">");
    for (value, label) in options {
        let chosen = if value == selected { " selected" } else { "" };
        let _ = write!(
            out,
            "<option value=\"{}\"{chosen}>{}</option>",
            esc(value),
            esc(label)
        );
    }
    out.push_str("</select>");
    out
}

/// A labelled field with its error (from the API) right below it.
pub fn field(label: &str, name: &str, input: &str, error: Option<&str>, hint: &str) -> String {
    let error = match error {
        Some(message) => format!(
            "<div class=\"error\" id=\"err-{name}\" role=\"alert\">{}</div>",
            esc(message)
        ),
        None => format!("<div class=\"error\" id=\"err-{name}\" hidden></div>"),
    };
    let hint = if hint.is_empty() {
        String::new()
    } else {
        format!("<div class=\"hint\">{hint}</div>")
    };
    format!("<div class=\"field\"><label for=\"{name}\">{label}</label>{input}{hint}{error}</div>")
}

pub fn text_input(name: &str, value: &str) -> String {
    format!(
        "<input type=\"text\" name=\"{name}\" id=\"{name}\" value=\"{}\">",
        esc(value)
    )
}

/// The readable part of a protobuf enum name: `RUN_STATUS_SUCCESS` → `SUCCESS`.
pub fn enum_label(full: &str, prefix: &str) -> String {
    full.strip_prefix(prefix).unwrap_or(full).to_string()
}

/// A status badge.
pub fn badge(text: &str) -> String {
    format!(
        "<span class=\"badge s-{}\">{}</span>",
        esc(&text.to_ascii_lowercase()),
        esc(text)
    )
}

/// A message box (notice or error) shown above a page's content.
pub fn notice(kind: &str, message: &str) -> String {
    if message.is_empty() {
        return String::new();
    }
    format!(
        "<div class=\"notice {kind}\" role=\"status\">{}</div>",
        esc(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(4_200), "4.2 s");
        assert_eq!(duration(185_000), "3 min 5 s");
        assert_eq!(duration(7_800_000), "2 h 10 min");
        assert_eq!(duration(3 * 86_400_000 + 4 * 3_600_000), "3 d 4 h");
    }

    #[test]
    fn times_keep_utc_in_the_title() {
        let html = time(0);
        assert!(html.contains('–'));
        let html = time(1_700_000_000_000);
        assert!(html.contains("title=\"2023-11-14 22:13:20 UTC\""), "{html}");
        assert!(html.contains("data-ms=\"1700000000000\""));
    }
}
