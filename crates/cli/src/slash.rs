//! The reports the interactive session's built-in slash commands print (`/context`,
//! `/agents`, `/permissions`; what a line asks for is [`session::slash`]). Pure functions
//! of the figures given, so each report is tested as text.

use render::printable;
use session::cost::compact_count;

/// `/context`: a bar of the window with the history's size (as the last request sent it)
/// and the two levels marked, then the figures.
pub fn context_report(used: Option<u64>, levels: &context::WaterLevels) -> String {
    const CELLS: usize = 50;
    let window = levels.context_window.0.max(1);
    let cell = |tokens: u64| ((tokens.min(window) * CELLS as u64) / window) as usize;
    let used_tokens = used.unwrap_or(0);
    let (filled, autocompact, blocking) = (
        cell(used_tokens),
        cell(levels.autocompact_at.0).min(CELLS - 1),
        cell(levels.blocking_at.0).min(CELLS - 1),
    );
    let mut bar = String::new();
    for index in 0..CELLS {
        bar.push_str(&if index == autocompact {
            "\x1b[33m│\x1b[0m".to_owned()
        } else if index == blocking {
            "\x1b[31m┃\x1b[0m".to_owned()
        } else if index < filled {
            "\x1b[36m█\x1b[0m".to_owned()
        } else {
            "\x1b[2m·\x1b[0m".to_owned()
        });
    }
    let percent = |tokens: u64| tokens * 100 / levels.autocompact_at.0.max(1);
    let used_line = match used {
        Some(tokens) => format!(
            "used {} ({}% of the autocompact level; as the last request sent it)",
            compact_count(tokens),
            percent(tokens)
        ),
        None => "used: nothing sent yet".to_owned(),
    };
    format!(
        "Context window {}\n  [{bar}]\n  {used_line}\n  \x1b[33m│\x1b[0m autocompact at {} (the history is summarized there)\n  \x1b[31m┃\x1b[0m blocking limit at {} (no request above it)\n  {} kept free for the answer",
        compact_count(window),
        compact_count(levels.autocompact_at.0),
        compact_count(levels.blocking_at.0),
        compact_count(levels.output_reserve.0),
    )
}

/// `/agents`: each agent the Task tool offers, with where it comes from, its model and
/// tools when it names them, and the first line of its description.
pub fn agents_report(agents: &[loop_core::subagent::AgentDefinition]) -> String {
    use loop_core::subagent::AgentSource;
    if agents.is_empty() {
        return "No subagents: the Task tool is not offered.".to_owned();
    }
    let mut text = String::from("Subagents (the model starts them with the Task tool):");
    for agent in agents {
        let source = match agent.source {
            AgentSource::BuiltIn => "built-in",
            AgentSource::User => "yours",
            AgentSource::Project => "project",
        };
        let mut extra = Vec::new();
        if let Some(model) = &agent.model {
            extra.push(format!("model {model}"));
        }
        if let Some(tools) = &agent.tools {
            extra.push(format!("tools {}", tools.join(", ")));
        }
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!("; {}", extra.join("; "))
        };
        let about = agent.description.lines().next().unwrap_or_default();
        let about: String = about.chars().take(100).collect();
        text.push_str(&format!(
            "\n  {} ({source}{}): {}",
            printable(&agent.name, false),
            printable(&extra, false),
            printable(&about, false)
        ));
    }
    text
}

/// `/permissions`: the mode, then each rule with its kind and where it came from, then the
/// calls allowed "always" in this session.
pub fn permissions_report(
    mode: &str,
    rules: &[(&'static str, String, String)],
    always: &[String],
) -> String {
    let mut text = format!("Permission mode: {mode}");
    if rules.is_empty() {
        text.push_str("\nNo rules (settings `permissions.allow`/`ask`/`deny`, or --allowedTools / --disallowedTools).");
    }
    for (kind, rule, origin) in rules {
        text.push_str(&format!(
            "\n  {kind:<5} {}  ({})",
            printable(rule, false),
            printable(origin, false)
        ));
    }
    for label in always {
        text.push_str(&format!(
            "\n  allow {}  (answered \"always\" in this session)",
            printable(label, false)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_bar_marks_the_levels() {
        let levels = context::WaterLevels::new(context::Tokens(200_000), context::Tokens(32_000));
        let text = context_report(Some(50_000), &levels);
        let plain = render::term::strip_styles(&text);
        let bar = plain.lines().nth(1).unwrap();
        // 50,000 of 200,000 is 12 of 50 cells; autocompact at 167,000 is cell 41; blocking
        // at 177,000 is cell 44.
        assert_eq!(bar.matches('█').count(), 12, "{bar}");
        assert_eq!(bar.chars().position(|c| c == '│'), Some(3 + 41), "{bar}");
        assert_eq!(bar.chars().position(|c| c == '┃'), Some(3 + 44), "{bar}");
        assert!(
            plain.contains("used 50.0k (29% of the autocompact level"),
            "{plain}"
        );
        assert!(plain.contains("autocompact at 167.0k"), "{plain}");
        assert!(plain.contains("blocking limit at 177.0k"), "{plain}");
        assert!(context_report(None, &levels).contains("nothing sent yet"));
    }

    #[test]
    fn permissions_name_their_origin() {
        let text = permissions_report(
            "acceptEdits",
            &[
                (
                    "allow",
                    "Bash(ls:*)".into(),
                    "/p/.agent/settings.json".into(),
                ),
                ("deny", "Read(./.env)".into(), "--disallowedTools".into()),
            ],
            &["Bash(make)".into()],
        );
        assert_eq!(
            text,
            "Permission mode: acceptEdits\n  allow Bash(ls:*)  (/p/.agent/settings.json)\n  deny  Read(./.env)  (--disallowedTools)\n  allow Bash(make)  (answered \"always\" in this session)"
        );
    }
}
