//! The console's words in English and Simplified Chinese. One table per language, looked up by
//! key; the tests check that both tables hold the same keys with the same `{}` placeholders,
//! and that every key the console's source names is in them. Text from the API (job names,
//! error messages) is shown as it comes: only the console's own words are translated.
//!
//! The language is the `xjob_lang` cookie the switch in the page header sets (`/language`),
//! else the browser's `Accept-Language` (the first of English or Chinese it prefers), else
//! English.

use axum::http::HeaderMap;
use axum::http::header::ACCEPT_LANGUAGE;

/// The cookie that remembers the language the user picked.
pub const COOKIE: &str = "xjob_lang";

/// A language of the console.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    /// Every language, in the order the switch lists them.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Zh];

    /// The cookie's and the switch's value.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }

    /// The page's `lang` attribute.
    pub fn html_lang(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh-Hans",
        }
    }

    /// The language's own name (the switch shows each in itself).
    pub fn name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Zh => "简体中文",
        }
    }

    pub fn parse(code: &str) -> Option<Lang> {
        Lang::ALL
            .into_iter()
            .find(|lang| lang.code().eq_ignore_ascii_case(code.trim()))
    }

    /// The language of a request: the cookie, else `Accept-Language`, else English.
    pub fn of_request(headers: &HeaderMap) -> Lang {
        if let Some(chosen) = super::cookies::cookie(headers, COOKIE).and_then(|c| Lang::parse(&c))
        {
            return chosen;
        }
        headers
            .get(ACCEPT_LANGUAGE)
            .and_then(|value| value.to_str().ok())
            .map(from_accept_language)
            .unwrap_or_default()
    }
}

/// The language an `Accept-Language` value prefers among ours: the highest `q` (ties: the
/// first listed) whose primary tag is `en` or `zh`; English when neither is there.
pub fn from_accept_language(value: &str) -> Lang {
    let mut best: Option<(f32, Lang)> = None;
    for item in value.split(',') {
        let mut parts = item.split(';');
        let tag = parts.next().unwrap_or_default().trim();
        let primary = tag.split('-').next().unwrap_or_default();
        let Some(lang) = Lang::parse(primary) else {
            continue;
        };
        let q = parts
            .filter_map(|part| part.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q > 0.0 && best.is_none_or(|(best_q, _)| q > best_q) {
            best = Some((q, lang));
        }
    }
    best.map(|(_, lang)| lang).unwrap_or_default()
}

/// The text of `key` in `lang` (the key itself if a table lacks it, which the tests forbid).
pub fn t(lang: Lang, key: &'static str) -> &'static str {
    let table = match lang {
        Lang::En => EN,
        Lang::Zh => ZH,
    };
    table
        .iter()
        .find(|(known, _)| *known == key)
        .map(|(_, text)| *text)
        .unwrap_or(key)
}

/// [`t`] with each `{}` replaced by the next of `args` (plain text: the page escapes it).
pub fn tf(lang: Lang, key: &'static str, args: &[&dyn std::fmt::Display]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut rest = t(lang, key);
    while let Some(at) = rest.find("{}") {
        out.push_str(&rest[..at]);
        if let Some(arg) = args.next() {
            out.push_str(&arg.to_string());
        }
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

const EN: &[(&str, &str)] = &[
    // the page frame
    ("frame.skip", "Skip to content"),
    ("nav.main", "main"),
    ("nav.dashboard", "Dashboard"),
    ("nav.jobs", "Jobs"),
    ("nav.runs", "Runs"),
    ("nav.executors", "Executors"),
    ("nav.users", "Users"),
    ("nav.audit", "Audit"),
    ("nav.language", "Language"),
    ("frame.open_console", "open console"),
    ("frame.logout", "Log out"),
    ("frame.account_title", "My account"),
    (
        "frame.open_banner",
        "No users exist yet, so this console (on a loopback admin) needs no login and everyone \
         who reaches it acts as an admin. Create the first admin with {} before exposing it.",
    ),
    // error pages
    ("error.title", "Error {}"),
    ("error.back", "Back"),
    (
        "error.not_found",
        "There is no such page here. Pick a page from the dashboard.",
    ),
    // login
    ("login.title", "Log in to xjob"),
    ("login.user", "User"),
    ("login.password", "Password"),
    ("login.submit", "Log in"),
    (
        "login.hint",
        "Users get a password with {} or from an admin on the Users page.",
    ),
    ("login.wrong", "Wrong user name or password."),
    // account
    ("account.name", "Name"),
    ("account.role", "Role"),
    (
        "account.open",
        "The console runs open (no users yet): there is no account to change.",
    ),
    ("account.change", "Change password"),
    ("account.current", "Current password"),
    ("account.new", "New password"),
    (
        "account.new_hint",
        "at least {} characters; signs out your other sessions",
    ),
    (
        "account.changed",
        "Password changed. Other sessions were signed out.",
    ),
    // users
    ("users.title", "Users"),
    ("users.id", "Id"),
    ("users.name", "Name"),
    ("users.role", "Role"),
    ("users.groups", "Groups"),
    ("users.created", "Created"),
    ("users.actions", "Actions"),
    ("users.tokens", "tokens"),
    ("users.my_account", "my account"),
    ("users.role_of", "Role of {}"),
    ("users.set_role", "Set role"),
    ("users.reset_link", "reset password"),
    ("users.grant_to", "Group to grant to {}"),
    ("users.grant", "Grant"),
    ("users.revoke_grant", "revoke this grant"),
    ("users.revoke_named", "revoke {}"),
    ("users.delete", "Delete"),
    ("users.delete_confirm", "Delete user {} and its tokens?"),
    ("users.new", "New user"),
    ("users.password", "Password"),
    (
        "users.password_hint",
        "for the console, at least {} characters; empty = API token only",
    ),
    ("users.create", "Create"),
    ("users.role_viewer", "viewer: reads its groups"),
    ("users.role_operator", "operator: runs its groups' jobs"),
    ("users.role_admin", "admin: everything"),
    (
        "users.created_notice",
        "User {} created. Its API token, shown only now: {}",
    ),
    ("users.deleted", "User {} deleted."),
    ("users.granted", "Group {} granted to user {}."),
    ("users.revoked", "Group {} revoked from user {}."),
    ("users.role_set", "User {} is now {}."),
    ("users.password_title", "Password of {}"),
    ("users.new_password", "New password"),
    (
        "users.reset_hint",
        "at least {} characters; empty = no password login (API tokens only). Ends the \
         user's console sessions.",
    ),
    ("users.reset_submit", "Set password"),
    ("users.password_set", "Password of user {} set."),
    ("users.back", "← Users"),
    // tokens
    ("tokens.title", "Tokens of user {}"),
    ("tokens.prefix", "Prefix"),
    ("tokens.description", "Description"),
    ("tokens.expires", "Expires"),
    ("tokens.revoked", "Revoked"),
    ("tokens.never", "never"),
    ("tokens.revoke", "Revoke"),
    ("tokens.revoke_confirm", "Revoke token {}…?"),
    ("tokens.new", "New token"),
    ("tokens.lifetime", "Lifetime (days)"),
    ("tokens.lifetime_hint", "0 = never expires"),
    ("tokens.issue", "Issue"),
    (
        "tokens.issued",
        "Token issued. Copy it now, it is not shown again: {}",
    ),
    ("tokens.revoked_notice", "Token {} revoked."),
    // audit
    ("audit.title", "Audit trail"),
    ("audit.empty", "No changes recorded yet."),
    ("audit.when", "When"),
    ("audit.who", "Who"),
    ("audit.call", "Call"),
    ("audit.object", "Object"),
    ("audit.summary", "Summary"),
];

const ZH: &[(&str, &str)] = &[
    ("frame.skip", "跳到正文"),
    ("nav.main", "主导航"),
    ("nav.dashboard", "仪表盘"),
    ("nav.jobs", "任务"),
    ("nav.runs", "运行记录"),
    ("nav.executors", "执行器"),
    ("nav.users", "用户"),
    ("nav.audit", "审计"),
    ("nav.language", "语言"),
    ("frame.open_console", "开放控制台"),
    ("frame.logout", "退出登录"),
    ("frame.account_title", "我的账号"),
    (
        "frame.open_banner",
        "目前还没有任何用户，因此这个控制台（管理端在回环地址上）无需登录，任何能访问它的人\
         都以管理员身份操作。对外开放之前，请先用 {} 创建第一个管理员。",
    ),
    ("error.title", "错误 {}"),
    ("error.back", "返回"),
    (
        "error.not_found",
        "这里没有这个页面。请从仪表盘选择一个页面。",
    ),
    ("login.title", "登录 xjob"),
    ("login.user", "用户"),
    ("login.password", "密码"),
    ("login.submit", "登录"),
    (
        "login.hint",
        "用户的密码可用 {} 设置，或由管理员在“用户”页面设置。",
    ),
    ("login.wrong", "用户名或密码错误。"),
    ("account.name", "名称"),
    ("account.role", "角色"),
    (
        "account.open",
        "控制台正以开放模式运行（还没有用户）：没有可修改的账号。",
    ),
    ("account.change", "修改密码"),
    ("account.current", "当前密码"),
    ("account.new", "新密码"),
    ("account.new_hint", "至少 {} 个字符；会退出你的其他会话"),
    ("account.changed", "密码已修改，其他会话已退出。"),
    ("users.title", "用户"),
    ("users.id", "编号"),
    ("users.name", "名称"),
    ("users.role", "角色"),
    ("users.groups", "执行器分组"),
    ("users.created", "创建时间"),
    ("users.actions", "操作"),
    ("users.tokens", "令牌"),
    ("users.my_account", "我的账号"),
    ("users.role_of", "{} 的角色"),
    ("users.set_role", "设置角色"),
    ("users.reset_link", "重置密码"),
    ("users.grant_to", "授权给 {} 的分组"),
    ("users.grant", "授权"),
    ("users.revoke_grant", "撤销此授权"),
    ("users.revoke_named", "撤销 {}"),
    ("users.delete", "删除"),
    ("users.delete_confirm", "删除用户 {} 及其令牌？"),
    ("users.new", "新建用户"),
    ("users.password", "密码"),
    (
        "users.password_hint",
        "用于控制台，至少 {} 个字符；留空表示只用 API 令牌",
    ),
    ("users.create", "创建"),
    ("users.role_viewer", "viewer：查看其分组"),
    ("users.role_operator", "operator：运行其分组的任务"),
    ("users.role_admin", "admin：全部权限"),
    (
        "users.created_notice",
        "用户 {} 已创建。它的 API 令牌只显示这一次：{}",
    ),
    ("users.deleted", "用户 {} 已删除。"),
    ("users.granted", "已将分组 {} 授权给用户 {}。"),
    ("users.revoked", "分组 {} 已从用户 {} 撤销授权。"),
    ("users.role_set", "用户 {} 现在是 {}。"),
    ("users.password_title", "{} 的密码"),
    ("users.new_password", "新密码"),
    (
        "users.reset_hint",
        "至少 {} 个字符；留空表示不能用密码登录（只用 API 令牌）。会结束该用户的控制台会话。",
    ),
    ("users.reset_submit", "设置密码"),
    ("users.password_set", "用户 {} 的密码已设置。"),
    ("users.back", "← 用户"),
    ("tokens.title", "用户 {} 的令牌"),
    ("tokens.prefix", "前缀"),
    ("tokens.description", "说明"),
    ("tokens.expires", "过期时间"),
    ("tokens.revoked", "撤销时间"),
    ("tokens.never", "永不"),
    ("tokens.revoke", "撤销"),
    ("tokens.revoke_confirm", "撤销令牌 {}…？"),
    ("tokens.new", "新建令牌"),
    ("tokens.lifetime", "有效期（天）"),
    ("tokens.lifetime_hint", "0 表示永不过期"),
    ("tokens.issue", "签发"),
    (
        "tokens.issued",
        "令牌已签发。请现在复制，它不会再次显示：{}",
    ),
    ("tokens.revoked_notice", "令牌 {} 已撤销。"),
    ("audit.title", "审计日志"),
    ("audit.empty", "还没有记录任何变更。"),
    ("audit.when", "时间"),
    ("audit.who", "操作人"),
    ("audit.call", "调用"),
    ("audit.object", "对象"),
    ("audit.summary", "摘要"),
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn table(entries: &[(&'static str, &'static str)]) -> BTreeMap<&'static str, &'static str> {
        let map: BTreeMap<_, _> = entries.iter().copied().collect();
        assert_eq!(map.len(), entries.len(), "a key is listed twice");
        map
    }

    #[test]
    fn every_key_is_in_both_languages_with_the_same_placeholders() {
        let (en, zh) = (table(EN), table(ZH));
        let only_en: Vec<_> = en.keys().filter(|key| !zh.contains_key(*key)).collect();
        let only_zh: Vec<_> = zh.keys().filter(|key| !en.contains_key(*key)).collect();
        assert!(only_en.is_empty(), "missing in Chinese: {only_en:?}");
        assert!(only_zh.is_empty(), "missing in English: {only_zh:?}");
        for (key, text) in &en {
            let other = zh[key];
            assert!(
                !text.trim().is_empty() && !other.trim().is_empty(),
                "{key} empty"
            );
            assert_eq!(
                text.matches("{}").count(),
                other.matches("{}").count(),
                "{key}: placeholders differ: {text:?} / {other:?}"
            );
            for text in [text, &other] {
                assert_eq!(
                    text.matches('{').count(),
                    text.matches("{}").count(),
                    "{key}: only {{}} placeholders: {text:?}"
                );
            }
        }
    }

    /// Every `t(…lang, "key")` / `tf(…lang, "key", …)` in the console's source names a key of
    /// the tables (a typo would show the key on the page).
    #[test]
    fn every_key_the_console_uses_exists() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console");
        let en = table(EN);
        let mut files = vec![root.clone()];
        let mut missing = Vec::new();
        let mut used = 0;
        while let Some(path) = files.pop() {
            if path.is_dir() {
                for entry in std::fs::read_dir(&path).expect("console dir").flatten() {
                    files.push(entry.path());
                }
                continue;
            }
            // This file's own comments and tests name keys as examples.
            if path.extension().is_none_or(|ext| ext != "rs") || path.ends_with("i18n.rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("source");
            // `t(lang, "key")`, `tf(posted.viewer.lang, "key", …)`: a language, then a key.
            {
                for rest in source.split("lang, \"").skip(1) {
                    let key = rest.split('"').next().unwrap_or_default();
                    used += 1;
                    if !en.contains_key(key) {
                        missing.push(format!("{}: {key}", path.display()));
                    }
                }
            }
        }
        assert!(
            used > 20,
            "only {used} uses found: is the pattern still right?"
        );
        assert!(missing.is_empty(), "keys not in the tables: {missing:?}");
    }

    #[test]
    fn the_browser_language_picks_english_or_chinese() {
        assert_eq!(from_accept_language("zh-CN,zh;q=0.9,en;q=0.8"), Lang::Zh);
        assert_eq!(from_accept_language("en-US,en;q=0.9,zh;q=0.8"), Lang::En);
        assert_eq!(from_accept_language("fr-FR, zh;q=0.5, en;q=0.4"), Lang::Zh);
        assert_eq!(from_accept_language("de, fr"), Lang::En);
        assert_eq!(from_accept_language("zh;q=0, en"), Lang::En);
        assert_eq!(from_accept_language(""), Lang::En);
    }

    #[test]
    fn placeholders_are_filled_in_order() {
        assert_eq!(
            tf(Lang::En, "users.granted", &[&3, &"vera"]),
            "Group 3 granted to user vera."
        );
        assert_eq!(t(Lang::Zh, "nav.jobs"), "任务");
    }
}
