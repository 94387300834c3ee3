//! Terminal notifications, as Claude Code sends them (its `preferredNotifChannel` setting):
//! an OSC 9 notification for iTerm2, OSC 99 for kitty, OSC 777 for Ghostty, or the bell.
//! `auto` picks from the terminal the variables name (`TERM_PROGRAM`, `TERM`,
//! `KITTY_WINDOW_ID`), and sends nothing to a terminal it does not know.

/// Where a notification goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Channel {
    /// Picked from the terminal ([`Channel::resolve`]).
    #[default]
    Auto,
    /// iTerm2's `OSC 9`.
    ITerm2,
    /// iTerm2's `OSC 9` and the bell.
    ITerm2WithBell,
    /// kitty's `OSC 99`.
    Kitty,
    /// Ghostty's `OSC 777`.
    Ghostty,
    /// The bell (`BEL`).
    TerminalBell,
    /// None.
    Disabled,
}

impl Channel {
    /// The channel a `preferredNotifChannel` value names (Claude Code's values: `auto`,
    /// `iterm2`, `iterm2_with_bell`, `kitty`, `ghostty`, `terminal_bell`,
    /// `notifications_disabled`); `None` for another value.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "auto" => Self::Auto,
            "iterm2" => Self::ITerm2,
            "iterm2_with_bell" => Self::ITerm2WithBell,
            "kitty" => Self::Kitty,
            "ghostty" => Self::Ghostty,
            "terminal_bell" => Self::TerminalBell,
            "notifications_disabled" => Self::Disabled,
            _ => return None,
        })
    }

    /// `Auto` made concrete from the terminal's variables (`env`): iTerm2, kitty and Ghostty
    /// by name, Apple's Terminal by its bell; `Disabled` for any other terminal (an unknown
    /// escape sequence could print). Other channels are themselves.
    pub fn resolve(self, env: &dyn Fn(&str) -> Option<String>) -> Self {
        if self != Self::Auto {
            return self;
        }
        let program = env("TERM_PROGRAM").unwrap_or_default();
        let term = env("TERM").unwrap_or_default();
        match program.as_str() {
            "iTerm.app" => Self::ITerm2,
            "ghostty" => Self::Ghostty,
            "Apple_Terminal" => Self::TerminalBell,
            _ if term == "xterm-kitty" || env("KITTY_WINDOW_ID").is_some() => Self::Kitty,
            _ if term == "xterm-ghostty" => Self::Ghostty,
            _ => Self::Disabled,
        }
    }

    /// The bytes that show a notification of `title` and `body` on this channel (control
    /// characters and the separators of the sequence taken out of both); `None` when the
    /// channel sends nothing. `Auto` must be resolved first: it sends nothing.
    pub fn sequence(self, title: &str, body: &str) -> Option<String> {
        let clean = |text: &str| -> String {
            text.chars()
                .filter(|c| !c.is_control())
                .map(|c| if c == ';' { ',' } else { c })
                .collect()
        };
        let (title, body) = (clean(title), clean(body));
        Some(match self {
            Self::ITerm2 => format!("\x1b]9;\n\n{title}: {body}\x07"),
            Self::ITerm2WithBell => format!("\x1b]9;\n\n{title}: {body}\x07\x07"),
            Self::Kitty => {
                format!("\x1b]99;i=1:d=0:p=title;{title}\x1b\\\x1b]99;i=1:d=1:p=body;{body}\x1b\\")
            }
            Self::Ghostty => format!("\x1b]777;notify;{title};{body}\x07"),
            Self::TerminalBell => "\x07".to_owned(),
            Self::Auto | Self::Disabled => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_terminal_and_stays_quiet_elsewhere() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        let auto = Channel::Auto;
        assert_eq!(
            auto.resolve(&env(&[("TERM_PROGRAM", "iTerm.app")])),
            Channel::ITerm2
        );
        assert_eq!(
            auto.resolve(&env(&[("TERM", "xterm-kitty")])),
            Channel::Kitty
        );
        assert_eq!(
            auto.resolve(&env(&[("TERM_PROGRAM", "ghostty")])),
            Channel::Ghostty
        );
        assert_eq!(
            auto.resolve(&env(&[("TERM_PROGRAM", "Apple_Terminal")])),
            Channel::TerminalBell
        );
        assert_eq!(
            auto.resolve(&env(&[("TERM", "xterm-256color")])),
            Channel::Disabled
        );
        assert_eq!(
            Channel::TerminalBell.resolve(&env(&[])),
            Channel::TerminalBell
        );
        assert_eq!(Channel::parse("kitty"), Some(Channel::Kitty));
        assert_eq!(Channel::parse("loud"), None);
    }

    #[test]
    fn sequences_carry_no_control_characters_of_the_text() {
        assert_eq!(
            Channel::Ghostty
                .sequence("agent", "done; \x1b[2Jok")
                .as_deref(),
            Some("\x1b]777;notify;agent;done, [2Jok\x07")
        );
        assert_eq!(
            Channel::TerminalBell.sequence("a", "b").as_deref(),
            Some("\x07")
        );
        assert_eq!(Channel::Disabled.sequence("a", "b"), None);
        assert_eq!(Channel::Auto.sequence("a", "b"), None);
        let iterm = Channel::ITerm2
            .sequence("agent", "needs your approval")
            .unwrap();
        assert!(iterm.starts_with("\x1b]9;") && iterm.ends_with("needs your approval\x07"));
    }
}
