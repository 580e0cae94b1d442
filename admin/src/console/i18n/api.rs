//! The API's refusals in the console's language. The API answers in English (its messages are
//! part of the gRPC contract, read by scripts and other clients), so the console translates the
//! ones a form shows: each English message is matched against the patterns below, where a `{}`
//! stands for any text (a value the user typed, a number, a name), and the Chinese text gets
//! the same pieces in order. A piece is itself translated when it is a known message (the
//! detail of a cron error, a field's name). A message no pattern knows is shown as it came.

use super::Lang;

/// How deep pieces of a message are translated (a cron error inside "invalid cron …").
const MAX_DEPTH: usize = 3;

/// `message` from the API in `lang`.
pub fn say(lang: Lang, message: &str) -> String {
    match lang {
        Lang::En => message.to_string(),
        Lang::Zh => translate(message, 0),
    }
}

fn translate(message: &str, depth: usize) -> String {
    if depth >= MAX_DEPTH {
        return message.to_string();
    }
    for (pattern, zh) in ZH_API {
        if let Some(pieces) = matches(pattern, message) {
            let pieces: Vec<String> = pieces
                .into_iter()
                .map(|piece| translate(piece, depth + 1))
                .collect();
            return fill(zh, &pieces);
        }
    }
    message.to_string()
}

/// The pieces of `message` that `pattern`'s `{}` stand for, or `None` when it does not match.
/// Each `{}` takes the shortest text (maybe none: `''` typed empty) after which the next
/// literal follows.
fn matches<'m>(pattern: &str, message: &'m str) -> Option<Vec<&'m str>> {
    let literals: Vec<&str> = pattern.split("{}").collect();
    let (first, rest) = literals.split_first()?;
    let mut remaining = message.strip_prefix(first)?;
    let mut pieces = Vec::new();
    for (index, literal) in rest.iter().enumerate() {
        let last = index + 1 == rest.len();
        let at = if last {
            // The last literal ends the message.
            if !remaining.ends_with(literal) {
                return None;
            }
            remaining.len() - literal.len()
        } else if literal.is_empty() {
            return None;
        } else {
            remaining.find(literal)?
        };
        pieces.push(&remaining[..at]);
        remaining = &remaining[at + literal.len()..];
    }
    (remaining.is_empty()).then_some(pieces)
}

fn fill(template: &str, pieces: &[String]) -> String {
    let mut out = String::new();
    let mut pieces = pieces.iter();
    let mut rest = template;
    while let Some(at) = rest.find("{}") {
        out.push_str(&rest[..at]);
        if let Some(piece) = pieces.next() {
            out.push_str(piece);
        }
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

/// The API's messages (after the field's name, which the form shows by the field) and their
/// Chinese; the more specific pattern first.
const ZH_API: &[(&str, &str)] = &[
    // Fields and values.
    ("required", "必填"),
    ("must not be empty", "不能为空"),
    ("must be set", "必须选择"),
    ("required (what changed)", "必填（说明改了什么）"),
    ("required for GLUE_TYPE_BEAN", "BEAN 任务必填"),
    (
        "required for {} (the script to run)",
        "{} 任务必填（要运行的脚本）",
    ),
    ("must be >= 0, got {}", "不能小于 0，收到的是 {}"),
    (
        "must be >= 0 (0 = count all), got {}",
        "不能小于 0（0 = 全部），收到的是 {}",
    ),
    (
        "must be a finite number >= 0, got {}",
        "必须是不小于 0 的有限数，收到的是 {}",
    ),
    (
        "must be between 0 and {} ms (an hour), got {}",
        "必须在 0 到 {} 毫秒（一小时）之间，收到的是 {}",
    ),
    (
        "must be between 0 (off) and {} ms (a day), got {}",
        "必须在 0（关闭）到 {} 毫秒（一天）之间，收到的是 {}",
    ),
    ("{} bytes exceeds the limit of {}", "{} 字节，超过上限 {}"),
    (
        "{} characters exceeds the limit of {}",
        "{} 个字符，超过上限 {}",
    ),
    ("longer than {} bytes", "超过 {} 字节"),
    (
        "cannot change after creation (is {}, got {})",
        "创建后不能修改（原为 {}，提交的是 {}）",
    ),
    ("cannot change (is '{}')", "不能修改（原为“{}”）"),
    ("unknown value {}", "未知的值 {}"),
    // Schedules.
    ("invalid cron '{}': {}", "无效的 cron 表达式“{}”：{}"),
    ("cron expression is empty", "cron 表达式为空"),
    (
        "expected 6 or 7 fields (second minute hour day-of-month month day-of-week [year]), found {}",
        "应有 6 或 7 个字段（秒 分 时 日 月 周 [年]），实际为 {} 个",
    ),
    (
        "{}: value {} out of range {}-{}",
        "{}：值 {} 超出范围 {}-{}",
    ),
    (
        "{}: increment {} out of range 1-{}",
        "{}：步长 {} 超出范围 1-{}",
    ),
    ("{}: invalid value '{}'", "{}：无效的值“{}”"),
    ("{}: invalid increment '{}'", "{}：无效的步长“{}”"),
    (
        "support for specifying both a day-of-week and a day-of-month is not implemented",
        "不支持同时指定“日”和“周”：其中一个请用 ?",
    ),
    (
        "day-of-month and day-of-week cannot both be '?': one of them must be specified",
        "“日”和“周”不能都是 ?：必须指定其中一个",
    ),
    ("second", "秒"),
    ("minute", "分"),
    ("hour", "时"),
    ("day-of-month", "日"),
    ("month", "月"),
    ("day-of-week", "周"),
    ("year", "年"),
    ("'{}' is not a whole number of seconds", "“{}”不是整数秒"),
    ("{} seconds is out of range 1-{}", "{} 秒超出范围 1-{}"),
    ("unknown time zone '{}'", "未知的时区“{}”"),
    (
        "job {} has schedule type NONE and cannot be started",
        "任务 {} 的调度类型为 NONE，不能启动",
    ),
    (
        "job {} has no future fire time",
        "任务 {} 没有将来的触发时间",
    ),
    // Jobs and their children.
    (
        "job {} cannot be its own child",
        "任务 {} 不能是自己的子任务",
    ),
    (
        "cycle {} (reached through child {})",
        "子任务形成循环 {}（经由子任务 {}）",
    ),
    ("cycle {}", "子任务形成循环 {}"),
    (
        "job {} is a BEAN job: it runs a named handler and has no glue source",
        "任务 {} 是 BEAN 任务：它运行指定的处理器，没有脚本源码",
    ),
    // Groups and addresses.
    (
        "group {} is used by {} job(s); delete them first",
        "执行器分组 {} 仍被 {} 个任务使用；请先删除这些任务",
    ),
    ("'{}' already exists", "“{}”已存在"),
    (
        "a MANUAL group needs at least one address",
        "MANUAL 分组至少需要一个地址",
    ),
    (
        "{} addresses exceeds the limit of {}",
        "{} 个地址，超过上限 {}",
    ),
    (
        "'{}' must start with http:// or https://",
        "“{}”必须以 http:// 或 https:// 开头",
    ),
    (
        "'{}' must have no path (expected http://HOST:PORT)",
        "“{}”不能带路径（应为 http://HOST:PORT）",
    ),
    (
        "'{}' has no valid host (expected http://HOST:PORT)",
        "“{}”没有有效的主机（应为 http://HOST:PORT）",
    ),
    (
        "'{}' has an invalid port (expected 1 to 65535)",
        "“{}”的端口无效（应为 1 到 65535）",
    ),
    ("'{}' is longer than {} bytes", "“{}”超过 {} 字节"),
    (
        "'{}' may contain only letters, digits, '_', '.' and '-'",
        "“{}”只能包含字母、数字、“_”、“.”和“-”",
    ),
    (
        "'{}' must be {}-{} characters, has {}",
        "“{}”须为 {}-{} 个字符，实际为 {} 个",
    ),
    (
        "may contain only visible ASCII characters (no spaces)",
        "只能包含可见的 ASCII 字符（不能有空格）",
    ),
    (
        "address '{}' is not an address of group {}",
        "地址“{}”不属于执行器分组 {}",
    ),
    // Not found.
    ("job {} not found", "任务 {} 不存在"),
    ("group {} not found", "执行器分组 {} 不存在"),
    ("log {} not found", "运行记录 {} 不存在"),
    ("user {} not found", "用户 {} 不存在"),
    ("token {} not found", "令牌 {} 不存在"),
    ("glue version {} not found", "源码版本 {} 不存在"),
    // Runs.
    (
        "log {} is not running (status {})",
        "运行 {} 不在运行中（状态 {}）",
    ),
    ("log {} has no executor", "运行 {} 没有执行器"),
    (
        "run {} never reached an executor: {}",
        "运行 {} 没有到达执行器：{}",
    ),
    // Users and passwords.
    (
        "at least {} characters (or empty for no password login)",
        "至少 {} 个字符（或留空，表示不能用密码登录）",
    ),
    ("does not match the current password", "与当前密码不符"),
    (
        "must be admin, operator or viewer",
        "必须是 admin、operator 或 viewer",
    ),
    (
        "an admin cannot change their own role (ask another admin)",
        "管理员不能修改自己的角色（请另一位管理员修改）",
    ),
    (
        "an admin cannot delete their own user (ask another admin)",
        "管理员不能删除自己（请另一位管理员删除）",
    ),
    (
        "user {} has no grant on group {}",
        "用户 {} 没有执行器分组 {} 的授权",
    ),
    (
        "user '{}' has no console password; an admin sets one (ResetPassword)",
        "用户“{}”没有控制台密码；请管理员设置（ResetPassword）",
    ),
    (
        "the admin runs open (no users yet): there is no own password to change",
        "调度中心以开放模式运行（还没有用户）：没有自己的密码可改",
    ),
    (
        "missing permission {} (user '{}', role {})",
        "缺少权限 {}（用户“{}”，角色 {}）",
    ),
    ("the database does not answer", "数据库没有响应"),
    ("database unavailable", "数据库不可用"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_messages_read_in_chinese_with_their_values() {
        assert_eq!(say(Lang::Zh, "required"), "必填");
        assert_eq!(say(Lang::Zh, "job 42 not found"), "任务 42 不存在");
        assert_eq!(
            say(
                Lang::Zh,
                "invalid cron 'x y': expected 6 or 7 fields (second minute hour day-of-month month day-of-week [year]), found 2"
            ),
            "无效的 cron 表达式“x y”：应有 6 或 7 个字段（秒 分 时 日 月 周 [年]），实际为 2 个"
        );
        assert_eq!(
            say(
                Lang::Zh,
                "invalid cron '0 99 * * * ?': minute: value 99 out of range 0-59"
            ),
            "无效的 cron 表达式“0 99 * * * ?”：分：值 99 超出范围 0-59"
        );
        assert_eq!(say(Lang::Zh, "something new"), "something new");
        assert_eq!(say(Lang::En, "required"), "required");
    }

    /// Every pattern's `{}` count is the same in both languages (a piece is never dropped).
    #[test]
    fn patterns_keep_every_piece() {
        for (pattern, zh) in ZH_API {
            assert_eq!(
                pattern.matches("{}").count(),
                zh.matches("{}").count(),
                "{pattern}"
            );
            assert!(!zh.is_ascii(), "{pattern}: not translated");
        }
    }
}
