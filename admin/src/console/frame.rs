//! The page frame around every signed-in page: navigation by what the viewer may see, who is
//! signed in, the open-console banner, and the CSRF field every form carries. It sits above
//! `html.rs` (which knows no sessions) and `session.rs`.

use axum::response::Response;

use super::html::{self, Markup, markup};
use super::session::Viewer;

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
/// then `body`. Without a viewer (login) the page has no navigation.
pub fn page(viewer: Option<&Viewer>, title: &str, nav: Nav, body: Markup) -> Response {
    let header = viewer.map(|viewer| header(viewer, nav)).unwrap_or_default();
    html::document(title, header, body)
}

fn header(viewer: &Viewer, nav: Nav) -> Markup {
    let mut out = Markup::literal(
        "<header class=\"top\"><a class=\"brand\" href=\"/\">xjob</a>\
         <nav aria-label=\"main\">",
    );
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
            Markup::literal(" aria-current=\"page\"")
        } else {
            Markup::new()
        };
        out.push(markup!("<a href=\"{}\"{}>{}</a>", href, current, label));
    }
    out.push(Markup::literal("</nav><div class=\"who\">"));
    if viewer.is_open() {
        out.push(Markup::literal("<span>open console</span>"));
    } else {
        out.push(markup!(
            "<span>{}</span><form method=\"post\" action=\"/logout\">{}\
             <button class=\"link\" id=\"logout\">Log out</button></form>",
            viewer.name(),
            csrf_field(viewer)
        ));
    }
    out.push(Markup::literal("</div></header>"));
    if viewer.is_open() {
        out.push(Markup::literal(
            "<div class=\"banner\" id=\"open-banner\">No users exist yet, so this console \
             (on a loopback admin) needs no login and everyone who reaches it acts as an \
             admin. Create the first admin with <code>xjob user create --role admin \
             --password-stdin NAME</code> before exposing it.</div>",
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
