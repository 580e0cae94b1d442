//! The page frame around every signed-in page: navigation by what the viewer may see, who is
//! signed in, the open-console banner, and the CSRF field every form carries. It sits above
//! `html.rs` (which knows no sessions) and `session.rs`.

use axum::response::Response;

use super::html::{self, Markup, markup};
use super::i18n::{Lang, t};
use super::session::Viewer;

/// Which navigation entry a page belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Dashboard,
    Jobs,
    Runs,
    Executors,
    Calendars,
    Workflows,
    Users,
    Audit,
    None,
}

/// A whole page: head, navigation (by what the viewer may see), the open-console banner,
/// then `body`. Without a viewer (login) the page has no navigation.
pub fn page(viewer: Option<&Viewer>, title: &str, nav: Nav, body: Markup) -> Response {
    let lang = viewer.map(|viewer| viewer.lang).unwrap_or_default();
    page_in(lang, viewer, title, nav, body)
}

/// [`page`] in a given language (the login page has no viewer, only the request's language):
/// without a viewer, the header is just the language switch.
pub fn page_in(
    lang: Lang,
    viewer: Option<&Viewer>,
    title: &str,
    nav: Nav,
    body: Markup,
) -> Response {
    let header = match viewer {
        Some(viewer) => header(viewer, nav),
        None => markup!(
            "<header class=\"top\"><span class=\"brand\">xjob</span>{}</header>",
            language_switch(lang)
        ),
    };
    html::document_in(lang, title, header, body)
}

/// Links to `/language`, which sets the language cookie and comes back to this page; each
/// language named in itself, the current one marked.
fn language_switch(lang: Lang) -> Markup {
    let mut out = markup!(
        "<nav class=\"lang\" aria-label=\"{}\">",
        t(lang, "nav.language")
    );
    for (index, choice) in Lang::ALL.into_iter().enumerate() {
        if index > 0 {
            out.push(Markup::literal(" · "));
        }
        let current = if choice == lang {
            Markup::literal(" aria-current=\"true\"")
        } else {
            Markup::new()
        };
        out.push(markup!(
            "<a href=\"/language?lang={}\" lang=\"{}\" id=\"lang-{}\"{}>{}</a>",
            choice.code(),
            choice.html_lang(),
            choice.code(),
            current,
            choice.name()
        ));
    }
    out.push(Markup::literal("</nav>"));
    out
}

fn header(viewer: &Viewer, nav: Nav) -> Markup {
    let lang = viewer.lang;
    let mut out = markup!(
        "<header class=\"top\"><a class=\"brand\" href=\"/\">xjob</a>\
         <nav aria-label=\"{}\">",
        t(lang, "nav.main")
    );
    let mut entries = vec![
        (Nav::Dashboard, "/", t(lang, "nav.dashboard")),
        (Nav::Jobs, "/jobs", t(lang, "nav.jobs")),
        (Nav::Runs, "/runs", t(lang, "nav.runs")),
        (Nav::Executors, "/executors", t(lang, "nav.executors")),
        (Nav::Calendars, "/calendars", t(lang, "nav.calendars")),
        (Nav::Workflows, "/workflows", t(lang, "nav.workflows")),
    ];
    if viewer.is_admin() && !viewer.is_open() {
        entries.push((Nav::Users, "/users", t(lang, "nav.users")));
    }
    if viewer.is_admin() {
        entries.push((Nav::Audit, "/audit", t(lang, "nav.audit")));
    }
    for (entry, href, label) in entries {
        let current = if entry == nav {
            Markup::literal(" aria-current=\"page\"")
        } else {
            Markup::new()
        };
        out.push(markup!("<a href=\"{}\"{}>{}</a>", href, current, label));
    }
    out.push(markup!(
        "</nav>{}<div class=\"who\">",
        language_switch(lang)
    ));
    if viewer.is_open() {
        out.push(markup!("<span>{}</span>", t(lang, "frame.open_console")));
    } else {
        out.push(markup!(
            "<a href=\"/account\" id=\"account\" title=\"{}\">{}</a>\
             <form method=\"post\" action=\"/logout\">{}\
             <button class=\"link\" id=\"logout\">{}</button></form>",
            t(lang, "frame.account_title"),
            viewer.name(),
            csrf_field(viewer),
            t(lang, "frame.logout")
        ));
    }
    out.push(Markup::literal("</div></header>"));
    if viewer.is_open() {
        // The command stays as is in every language.
        let banner = t(lang, "frame.open_banner");
        let (before, after) = banner.split_once("{}").unwrap_or((banner, ""));
        out.push(markup!(
            "<div class=\"banner\" id=\"open-banner\">{}<code>xjob user create --role admin \
             --password-stdin NAME</code>{}</div>",
            before,
            after
        ));
    }
    out
}

/// The hidden CSRF field every form carries.
pub fn csrf_field(viewer: &Viewer) -> Markup {
    markup!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        viewer.csrf
    )
}
