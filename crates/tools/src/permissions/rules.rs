//! Permission rules in Claude Code's syntax: `Tool` or `Tool(specifier)`.
//!
//! - `Bash(git status:*)`: the command `git status`, alone or followed by arguments (`:*`
//!   is a prefix at a word boundary); `Bash(npm run *)`: `*` matches any text; `Bash(ls)`:
//!   exactly that command; `Bash` or `Bash(*)`: every command.
//! - `Read(...)`, `Edit(...)`, `Write(...)`, `Glob(...)`, `Grep(...)`: gitignore-style path
//!   patterns. `//abs/path` is absolute, `~/path` is under the home directory, `/path` and
//!   `./path` and `path` are under the workspace root; a pattern without a `/` matches at any
//!   depth (`*.env`), a pattern naming a directory covers everything inside it. `Read` rules
//!   cover Read, Grep and Glob; `Edit` rules cover Edit and Write.
//! - `WebFetch(domain:example.com)`: fetches from that host (any letter case, a trailing dot
//!   ignored); `WebFetch(domain:*.example.com)`: from its subdomains, not itself. Any other
//!   WebFetch specifier is an error.
//! - Any other `Name` matches the tool of that name (`mcp__server` covers every tool of that
//!   server); `Name(specifier)` for other tools is accepted and never matches.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::WEB_FETCH;
use crate::Error;
use crate::paths;

/// One parsed rule.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    /// The rule as written.
    pub(crate) source: String,
    tool: String,
    spec: Spec,
}

#[derive(Clone, Debug)]
enum Spec {
    /// Every call of the tool.
    All,
    /// A Bash command pattern.
    Command(CommandPattern),
    /// A path pattern of a file tool: the compiled globs and their sources (absolute).
    Path(GlobSet, Vec<String>),
    /// A WebFetch host: exact (`example.com`) or its subdomains (`*.example.com`, stored
    /// as `.example.com`), lower case.
    Domain(String),
    /// A specifier for a tool this crate does not know: never matches.
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum CommandPattern {
    Exact(String),
    Prefix(String),
    Wildcard(String),
}

/// Whether a rule written for `rule_tool` speaks about calls of `tool`.
fn covers(rule_tool: &str, tool: &str) -> bool {
    match rule_tool {
        "Read" => matches!(tool, "Read" | "Grep" | "Glob"),
        "Edit" => matches!(tool, "Edit" | "Write" | "NotebookEdit"),
        other => other == tool,
    }
}

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'*')
}

impl Rule {
    /// Parses `source`; relative path patterns are anchored at `base` (the resolved
    /// workspace root).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRule`] when the syntax or a glob is wrong.
    pub(crate) fn parse(source: &str, base: &Path) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidRule {
            rule: source.to_owned(),
            reason: reason.to_owned(),
        };
        let text = source.trim();
        let (tool, spec) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let Some(inner) = rest.strip_suffix(')') else {
                    return Err(invalid("a specifier must end with `)`"));
                };
                (tool, Some(inner))
            }
        };
        if !valid_tool_name(tool) {
            return Err(invalid(
                "expected a tool name (letters, digits, `_`, `-`) before `(`",
            ));
        }
        let spec = match spec.map(str::trim) {
            None | Some("*") => Spec::All,
            Some("") => return Err(invalid("the specifier between `(` and `)` is empty")),
            Some(spec) if tool == "Bash" => match spec.strip_suffix(":*") {
                Some("") => Spec::All,
                Some(prefix) => Spec::Command(CommandPattern::Prefix(prefix.trim().to_owned())),
                None if spec.contains('*') => Spec::Command(CommandPattern::Wildcard(spec.into())),
                None => Spec::Command(CommandPattern::Exact(spec.to_owned())),
            },
            Some(spec) if tool == WEB_FETCH => {
                let Some(domain) = spec.strip_prefix("domain:").map(str::trim) else {
                    return Err(invalid(
                        "a WebFetch rule names a host: `WebFetch(domain:example.com)`",
                    ));
                };
                let domain = domain.trim_end_matches('.').to_ascii_lowercase();
                let host = domain.strip_prefix("*.").unwrap_or(&domain);
                if host.is_empty()
                    || (host.contains(['/', ':', '*', ' ', '@']) && !host.starts_with('['))
                {
                    return Err(invalid(
                        "expected a host name after `domain:`, such as `example.com` or `*.example.com`",
                    ));
                }
                Spec::Domain(match domain.strip_prefix('*') {
                    Some(subdomains) => subdomains.to_owned(),
                    None => crate::web::canonical_host(domain),
                })
            }
            Some(spec) if matches!(tool, "Read" | "Edit" | "Write" | "Glob" | "Grep") => {
                let (set, sources) = path_globs(spec, base).map_err(|reason| invalid(&reason))?;
                Spec::Path(set, sources)
            }
            Some(_) => Spec::Other,
        };
        Ok(Self {
            source: text.to_owned(),
            tool: tool.to_owned(),
            spec,
        })
    }

    /// Whether the rule names `tool` (by name, whatever its specifier).
    fn names(&self, tool: &str) -> bool {
        // `Edit` names every tool that edits files, `Read` every one that reads them, as in
        // Claude Code (for path rules and whole-tool rules alike).
        if covers(&self.tool, tool) {
            return true;
        }
        if let Some(prefix) = self.tool.strip_suffix('*') {
            return tool.starts_with(prefix);
        }
        // `mcp__server` covers `mcp__server__tool`.
        self.tool.starts_with("mcp__")
            && tool
                .strip_prefix(self.tool.as_str())
                .is_some_and(|rest| rest.starts_with("__"))
    }

    /// Whether this rule covers every call of `tool`.
    pub(crate) fn matches_tool(&self, tool: &str) -> bool {
        matches!(self.spec, Spec::All) && self.names(tool)
    }

    /// Whether this Bash rule matches a command given in its textual `forms`. Prefix and
    /// wildcard patterns are skipped when `patterns_apply` is false.
    pub(crate) fn matches_command(&self, forms: &[String], patterns_apply: bool) -> bool {
        if self.tool != "Bash" {
            return false;
        }
        match &self.spec {
            Spec::All => true,
            Spec::Command(pattern) => forms.iter().any(|form| match pattern {
                CommandPattern::Exact(exact) => form == exact,
                CommandPattern::Prefix(prefix) => {
                    patterns_apply
                        && (form == prefix
                            || form
                                .strip_prefix(prefix.as_str())
                                .is_some_and(|rest| rest.starts_with(' ')))
                }
                CommandPattern::Wildcard(pattern) => patterns_apply && wildcard(pattern, form),
            }),
            Spec::Path(..) | Spec::Domain(_) | Spec::Other => false,
        }
    }

    /// Whether this rule is a path rule covering `tool` that matches `path` (resolved).
    pub(crate) fn matches_path(&self, tool: &str, path: &Path) -> bool {
        match &self.spec {
            Spec::Path(globs, _) => covers(&self.tool, tool) && globs.is_match(path),
            _ => false,
        }
    }

    /// The compiled globs and their absolute sources, when this is a path rule covering
    /// `tool`.
    pub(crate) fn path_patterns(&self, tool: &str) -> Option<(&GlobSet, &[String])> {
        match &self.spec {
            Spec::Path(set, sources) if covers(&self.tool, tool) => Some((set, sources)),
            _ => None,
        }
    }

    /// Whether this is a Bash rule of any kind.
    pub(crate) fn is_bash(&self) -> bool {
        self.tool == "Bash"
    }

    /// Whether this is a WebFetch rule naming exactly `host` (not through `*.`).
    pub(crate) fn names_host(&self, host: &str) -> bool {
        matches!(&self.spec, Spec::Domain(domain) if self.tool == WEB_FETCH
            && !domain.starts_with('.')
            && *domain == host.trim_end_matches('.').to_ascii_lowercase())
    }

    /// Whether this is a WebFetch domain rule that matches `host` (see the module docs).
    pub(crate) fn matches_host(&self, host: &str) -> bool {
        let Spec::Domain(domain) = &self.spec else {
            return false;
        };
        if self.tool != WEB_FETCH {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match domain.strip_prefix('.') {
            Some(parent) => host
                .strip_suffix(parent)
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            None => host == *domain,
        }
    }
}

/// `*` matches any text (spaces included); a trailing ` *` also matches nothing, so
/// `ls *` covers `ls` itself.
fn wildcard(pattern: &str, text: &str) -> bool {
    if let Some(head) = pattern.strip_suffix(" *")
        && !head.contains('*')
        && text == head
    {
        return true;
    }
    let pieces: Vec<&str> = pattern.split('*').collect();
    let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
        return false;
    };
    if pieces.len() == 1 {
        return text == pattern;
    }
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Compiles a gitignore-style path specifier into globs over resolved absolute paths.
fn path_globs(spec: &str, base: &Path) -> Result<(GlobSet, Vec<String>), String> {
    let (anchor, pattern, anywhere): (PathBuf, &str, bool) =
        if let Some(rest) = spec.strip_prefix("//") {
            (PathBuf::from("/"), rest, false)
        } else if let Some(rest) = spec.strip_prefix("~/") {
            let home = std::env::var_os("HOME").ok_or("`~/` needs $HOME to be set")?;
            (PathBuf::from(home), rest, false)
        } else if let Some(rest) = spec.strip_prefix("./").or_else(|| spec.strip_prefix('/')) {
            (base.to_path_buf(), rest, false)
        } else {
            // Without a slash, gitignore matches the name at any depth.
            let anywhere = !spec.trim_end_matches('/').contains('/');
            (base.to_path_buf(), spec, anywhere)
        };
    let mut pattern = pattern.trim_end_matches('/').to_owned();
    if anywhere {
        pattern = format!("**/{pattern}");
    }
    // Resolve the literal leading directories (`..`, symbolic links) so that the pattern
    // speaks about the same real paths the tools check.
    let mut literal = anchor;
    let mut rest: Vec<&str> = Vec::new();
    let components = pattern.split('/').count();
    for (index, component) in pattern.split('/').enumerate() {
        let has_meta = component.contains(['*', '?', '[', '{', '\\']);
        if !rest.is_empty() || has_meta || index + 1 == components {
            rest.push(component);
        } else {
            literal.push(component);
        }
    }
    let literal = paths::real_path(&literal).map_err(|error| error.to_string())?;
    let literal = globset::escape(&literal.to_string_lossy());
    let full = format!("{}/{}", literal.trim_end_matches('/'), rest.join("/"));
    let mut candidates = vec![full.clone()];
    match full.strip_suffix("/**") {
        Some(directory) => candidates.push(directory.to_owned()),
        None => candidates.push(format!("{full}/**")),
    }
    let mut builder = GlobSetBuilder::new();
    for candidate in &candidates {
        let glob = GlobBuilder::new(candidate)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|error| error.kind().to_string())?;
        builder.add(glob);
    }
    let set = builder.build().map_err(|error| error.to_string())?;
    Ok((set, candidates))
}

/// The `allow`, `ask` and `deny` lists, parsed.
#[derive(Clone, Debug, Default)]
pub(crate) struct RuleSet {
    pub(crate) allow: Vec<Rule>,
    pub(crate) ask: Vec<Rule>,
    pub(crate) deny: Vec<Rule>,
}

impl RuleSet {
    /// Parses the three lists.
    ///
    /// # Errors
    ///
    /// The first [`Error::InvalidRule`].
    pub(crate) fn parse(
        allow: &[String],
        ask: &[String],
        deny: &[String],
        base: &Path,
    ) -> Result<Self, Error> {
        let parse = |list: &[String]| -> Result<Vec<Rule>, Error> {
            list.iter().map(|rule| Rule::parse(rule, base)).collect()
        };
        Ok(Self {
            allow: parse(allow)?,
            ask: parse(ask)?,
            deny: parse(deny)?,
        })
    }

    /// Whether a deny or ask rule keeps `path` from `tool`: walkers (Grep, Glob) skip such
    /// files instead of asking for each.
    pub(crate) fn hides(&self, tool: &str, path: &Path) -> bool {
        self.deny
            .iter()
            .chain(&self.ask)
            .any(|rule| rule.matches_path(tool, path))
    }

    /// Whether any deny or ask rule is a path rule for `tool` (walkers skip the per-file
    /// check otherwise).
    pub(crate) fn hides_anything(&self, tool: &str) -> bool {
        self.deny
            .iter()
            .chain(&self.ask)
            .any(|rule| matches!(rule.spec, Spec::Path(..)) && covers(&rule.tool, tool))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn rule(source: &str) -> Rule {
        Rule::parse(source, Path::new("/w")).unwrap()
    }

    fn forms(command: &str) -> Vec<String> {
        vec![command.to_owned()]
    }

    #[test]
    fn bash_patterns() {
        let cases = [
            ("Bash(git status:*)", "git status", true),
            ("Bash(git status:*)", "git status --short", true),
            ("Bash(git status:*)", "git statusx", false),
            ("Bash(git status:*)", "git", false),
            ("Bash(npm run test:*)", "npm run test -- --watch", true),
            ("Bash(npm run test:*)", "npm run build", false),
            ("Bash(ls)", "ls", true),
            ("Bash(ls)", "ls -la", false),
            ("Bash(git * main)", "git push origin main", true),
            ("Bash(git * main)", "git push origin dev", false),
            ("Bash(ls *)", "ls", true),
            ("Bash(ls *)", "ls -la", true),
            ("Bash(ls *)", "lsof", false),
            ("Bash", "anything at all", true),
            ("Bash(*)", "anything", true),
            ("Bash(:*)", "anything", true),
        ];
        for (source, command, expected) in cases {
            assert_eq!(
                rule(source).matches_command(&forms(command), true),
                expected,
                "{source} on {command:?}"
            );
        }
        assert!(!rule("Bash(git status:*)").matches_command(&forms("git status"), false));
        assert!(rule("Bash(ls)").matches_command(&forms("ls"), false));
        assert!(!rule("Read").matches_command(&forms("ls"), true));
    }

    #[test]
    fn tool_names() {
        assert!(rule("Read").matches_tool("Read"));
        // The families: `Read` names the tools that read files, `Edit` the ones that edit.
        assert!(rule("Read").matches_tool("Grep") && rule("Read").matches_tool("Glob"));
        assert!(rule("Edit").matches_tool("Write"));
        assert!(!rule("Write").matches_tool("Edit"));
        assert!(!rule("Grep").matches_tool("Read"));
        assert!(rule("mcp__github").matches_tool("mcp__github__create_issue"));
        assert!(!rule("mcp__github").matches_tool("mcp__githubx__y"));
        assert!(rule("mcp__github__*").matches_tool("mcp__github__create_issue"));
        assert!(!rule("Bash(ls)").matches_tool("Bash"));
        assert!(!rule("WebFetch(domain:example.com)").matches_tool("WebFetch"));
        assert!(rule("WebFetch").matches_tool("WebFetch"));
    }

    #[test]
    fn web_fetch_domains() {
        let cases = [
            ("WebFetch(domain:example.com)", "example.com", true),
            ("WebFetch(domain:example.com)", "EXAMPLE.com.", true),
            ("WebFetch(domain:Example.COM)", "example.com", true),
            ("WebFetch(domain:example.com)", "docs.example.com", false),
            (
                "WebFetch(domain:example.com)",
                "example.com.evil.net",
                false,
            ),
            ("WebFetch(domain:example.com)", "notexample.com", false),
            ("WebFetch(domain:*.example.com)", "docs.example.com", true),
            ("WebFetch(domain:*.example.com)", "a.b.example.com", true),
            ("WebFetch(domain:*.example.com)", "example.com", false),
            ("WebFetch(domain:*.example.com)", "badexample.com", false),
            ("WebFetch(domain:localhost)", "localhost", true),
            ("WebFetch(domain:127.0.0.1)", "127.0.0.1", true),
            ("WebFetch(domain:[::1])", "[::1]", true),
            ("WebFetch", "example.com", false),
            ("Read(domain:example.com)", "example.com", false),
        ];
        for (source, host, expected) in cases {
            assert_eq!(
                rule(source).matches_host(host),
                expected,
                "{source} on {host}"
            );
        }
        for source in [
            "WebFetch(example.com)",
            "WebFetch(domain:)",
            "WebFetch(domain:https://example.com)",
            "WebFetch(domain:a/b)",
            "WebFetch(domain:*.)",
        ] {
            assert!(
                matches!(
                    Rule::parse(source, Path::new("/w")),
                    Err(Error::InvalidRule { .. })
                ),
                "{source:?}"
            );
        }
    }

    #[test]
    fn path_patterns() {
        let cases = [
            ("Read(./secrets/**)", "Read", "/w/secrets/key.pem", true),
            ("Read(./secrets/**)", "Read", "/w/secrets", true),
            ("Read(./secrets/**)", "Grep", "/w/secrets/a/b", true),
            ("Read(./secrets/**)", "Edit", "/w/secrets/key.pem", false),
            (
                "Read(./secrets/**)",
                "Read",
                "/w/src/secrets/key.pem",
                false,
            ),
            ("Read(*.env)", "Read", "/w/.env", true),
            ("Read(*.env)", "Read", "/w/prod.env", true),
            ("Read(*.env)", "Read", "/w/deep/dir/prod.env", true),
            ("Read(.env)", "Read", "/w/.env", true),
            ("Edit(src/**)", "Edit", "/w/src/lib.rs", true),
            ("Edit(src/**)", "Write", "/w/src/a/b.rs", true),
            ("Edit(src/**)", "Edit", "/w/tests/a.rs", false),
            ("Edit(/docs)", "Write", "/w/docs/a.md", true),
            ("Edit(//tmp/out/**)", "Write", "/tmp/out/x", true),
            ("Edit(//tmp/out/**)", "Write", "/tmp/other", false),
            ("Write(build/)", "Write", "/w/build/x/y", true),
            ("Write(build/)", "Edit", "/w/build/x/y", false),
            ("Grep(vendor/**)", "Grep", "/w/vendor/a", true),
            ("Grep(vendor/**)", "Read", "/w/vendor/a", false),
        ];
        for (source, tool, path, expected) in cases {
            assert_eq!(
                rule(source).matches_path(tool, Path::new(path)),
                expected,
                "{source} for {tool} on {path}"
            );
        }
    }

    #[test]
    fn invalid_rules_are_errors() {
        for source in ["Bash(ls", "(ls)", "Bash()", "Read([)", "Na me", ""] {
            assert!(
                matches!(
                    Rule::parse(source, Path::new("/w")),
                    Err(Error::InvalidRule { .. })
                ),
                "{source:?}"
            );
        }
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("a*c", "abc"));
        assert!(wildcard("a*c", "ac"));
        assert!(!wildcard("a*c", "ab"));
        assert!(wildcard("*", ""));
        assert!(wildcard("a*b*c", "a-b-b-c"));
        assert!(!wildcard("ab*ba", "aba"));
    }
}
