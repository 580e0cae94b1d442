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

pub mod api;
mod en;
mod zh;

use en::EN;
use zh::ZH;

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
        let i18n = root.join("i18n");
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
            // The tables and this module's own tests name keys as examples.
            if path.extension().is_none_or(|ext| ext != "rs") || path.parent() == Some(&i18n) {
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
