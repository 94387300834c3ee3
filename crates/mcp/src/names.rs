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
    let digest = sha2::Sha256::digest(name.as_bytes());
    let hash: String = digest[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{}_{hash}", &name[..MAX_TOOL_NAME - 9])
}

/// The prefix of every tool of `server` (a permission rule naming the whole server).
pub fn server_prefix(server: &str) -> String {
    format!("mcp__{}", sanitize(server))
}

#[cfg(test)]
mod tests {
    use super::*;

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
