//! The names MCP tools have for the model and for permission rules: `mcp__<server>__<tool>`,
//! as Claude Code names them.

use sha2::Digest as _;

/// The longest tool name the Messages API accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// `text` with every character outside `[A-Za-z0-9_-]` as `_`.
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The model's name for `tool` of `server`: `mcp__<server>__<tool>`, characters outside
/// `[A-Za-z0-9_-]` as `_`. A name over [`MAX_TOOL_NAME`] characters keeps its first 55 and
/// ends with `_` and the first 8 hex digits of the SHA-256 of the full name, so distinct
/// long names stay distinct.
pub fn tool_name(server: &str, tool: &str) -> String {
    let name = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    if name.len() <= MAX_TOOL_NAME {
        return name;
    }
    hashed(&name, server, tool)
}

/// `name` cut to 55 characters, `_`, and the first 8 hex digits of the SHA-256 of the
/// server's and tool's own names (not the sanitized ones, so `a.b` and `a_b` differ).
fn hashed(name: &str, server: &str, tool: &str) -> String {
    let digest = sha2::Sha256::digest(format!("mcp__{server}__{tool}").as_bytes());
    let hash: String = digest[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{}_{hash}", &name[..name.len().min(MAX_TOOL_NAME - 9)])
}

/// The names of `tools` of `server`, in order, all distinct: as [`tool_name`], except that a
/// tool whose name would repeat an earlier one's (`delete.all` after `delete_all`) gets the
/// hashed form, so no call can reach the wrong tool and the request keeps unique names.
pub fn tool_names<'a>(server: &str, tools: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    tools
        .into_iter()
        .map(|tool| {
            let name = tool_name(server, tool);
            if seen.insert(name.clone()) {
                return name;
            }
            let distinct = hashed(&name, server, tool);
            seen.insert(distinct.clone());
            distinct
        })
        .collect()
}

/// The prefix of every tool of `server` (a permission rule naming the whole server).
pub fn server_prefix(server: &str) -> String {
    format!("mcp__{}", sanitize(server))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_collide_after_sanitizing_stay_distinct() {
        let names = tool_names("x", ["delete_all", "delete.all", "delete all"]);
        assert_eq!(names[0], "mcp__x__delete_all");
        assert!(names[1].starts_with("mcp__x__delete_all_"), "{names:?}");
        assert_ne!(names[1], names[2]);
        assert!(names.iter().all(|name| name.len() <= MAX_TOOL_NAME));
        let long_a = format!("{}.a", "t".repeat(80));
        let long_b = format!("{}_a", "t".repeat(80));
        assert_ne!(tool_name("x", &long_a), tool_name("x", &long_b));
    }

    #[test]
    fn names_are_claude_codes_and_fit_the_api() {
        assert_eq!(
            tool_name("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(
            tool_name("my server", "get.data"),
            "mcp__my_server__get_data"
        );
        assert_eq!(server_prefix("my server"), "mcp__my_server");
        let long = tool_name("server", &"x".repeat(80));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert!(long.starts_with("mcp__server__xxx"));
        assert_ne!(long, tool_name("server", &"x".repeat(81)));
    }
}
