//! The permission mode matrix (issue 2 "Permissions"): for a session mode (`plan`,
//! `accept`, `auto`) and a tool call's permission tag, whether the call runs, is refused,
//! or needs a person's approval.
//!
//! | tag      | plan  | accept | auto  |
//! |----------|-------|--------|-------|
//! | read     | allow | allow  | allow |
//! | write    | deny  | allow  | allow |
//! | exec     | ask   | ask    | allow |
//! | network  | allow | ask    | allow |
//! | send     | deny  | ask    | allow |
//! | config   | deny  | ask    | ask   |
//! | delegate | allow | allow  | allow |
//! | secret   | ask   | ask    | ask   |
//!
//! On top of the matrix ([`decide`]): `session.create{denyExec:true}` denies exec without
//! asking, and a call touching paths outside the workdir turns an allow into an ask (a
//! deny stays a deny).

use crate::tools::{Permission, ToolPlan};

/// A session's permission mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Read and plan; no changes.
    Plan,
    /// Edit files freely; ask before running things.
    Accept,
    /// Everything but configuration changes runs without asking.
    Auto,
}

impl Mode {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Accept => "accept",
            Mode::Auto => "auto",
        }
    }

    /// Parses `plan` / `accept` / `auto`.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "plan" => Some(Mode::Plan),
            "accept" => Some(Mode::Accept),
            "auto" => Some(Mode::Auto),
            _ => None,
        }
    }

    /// How much the mode lets run without asking: `plan` 0 < `accept` 1 < `auto` 2.
    pub fn rank(self) -> u8 {
        match self {
            Mode::Plan => 0,
            Mode::Accept => 1,
            Mode::Auto => 2,
        }
    }

    /// The less permissive of `self` and `other` (an agent definition's `permission` may
    /// narrow the mode it runs in, never widen it).
    pub fn narrower(self, other: Mode) -> Mode {
        if other.rank() < self.rank() {
            other
        } else {
            self
        }
    }
}

/// What the matrix says about one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Ask the session's origin connection first.
    Ask,
    /// Refuse it without asking (`mode_denied`).
    Deny,
}

/// The bare mode matrix.
pub fn matrix(mode: Mode, permission: Permission) -> Verdict {
    use Permission::*;
    use Verdict::*;
    match (mode, permission) {
        (_, Secret) => Ask,
        (_, Read) | (_, Delegate) => Allow,
        (Mode::Plan, Write) | (Mode::Plan, Send) | (Mode::Plan, Config) => Deny,
        (Mode::Plan, Exec) => Ask,
        (Mode::Plan, Network) => Allow,
        (Mode::Accept, Write) => Allow,
        (Mode::Accept, Exec)
        | (Mode::Accept, Network)
        | (Mode::Accept, Send)
        | (Mode::Accept, Config) => Ask,
        (Mode::Auto, Config) => Ask,
        (Mode::Auto, Write) | (Mode::Auto, Exec) | (Mode::Auto, Network) | (Mode::Auto, Send) => {
            Allow
        }
    }
}

/// The verdict for a planned call: the matrix, then `denyExec`, then the outside-workdir
/// rule (allow → ask; deny stays deny).
pub fn decide(mode: Mode, plan: &ToolPlan, deny_exec: bool) -> Verdict {
    if deny_exec && plan.permission == Permission::Exec {
        return Verdict::Deny;
    }
    match matrix(mode, plan.permission) {
        Verdict::Allow if !plan.outside_workdir.is_empty() => Verdict::Ask,
        v => v,
    }
}

/// Risk hint shown with an approval request (`approval.request.risk`).
pub fn risk(permission: Permission) -> &'static str {
    match permission {
        Permission::Read | Permission::Delegate => "low",
        Permission::Write | Permission::Network => "medium",
        Permission::Exec | Permission::Send | Permission::Config | Permission::Secret => "high",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn plan(permission: Permission, outside: bool) -> ToolPlan {
        ToolPlan {
            permission,
            outside_workdir: if outside {
                vec![PathBuf::from("/etc/passwd")]
            } else {
                vec![]
            },
            summary: "x".into(),
        }
    }

    #[test]
    fn matrix_matches_issue_2() {
        use Permission::*;
        use Verdict::*;
        let expected = [
            (Read, [Allow, Allow, Allow]),
            (Write, [Deny, Allow, Allow]),
            (Exec, [Ask, Ask, Allow]),
            (Network, [Allow, Ask, Allow]),
            (Send, [Deny, Ask, Allow]),
            (Config, [Deny, Ask, Ask]),
            (Delegate, [Allow, Allow, Allow]),
            (Secret, [Ask, Ask, Ask]),
        ];
        for (perm, verdicts) in expected {
            for (mode, want) in [Mode::Plan, Mode::Accept, Mode::Auto]
                .into_iter()
                .zip(verdicts)
            {
                assert_eq!(
                    matrix(mode, perm),
                    want,
                    "{} in {}",
                    perm.as_str(),
                    mode.as_str()
                );
            }
        }
    }

    #[test]
    fn deny_exec_refuses_exec_in_every_mode() {
        for mode in [Mode::Plan, Mode::Accept, Mode::Auto] {
            assert_eq!(
                decide(mode, &plan(Permission::Exec, false), true),
                Verdict::Deny
            );
            assert_eq!(
                decide(mode, &plan(Permission::Read, false), true),
                Verdict::Allow
            );
        }
    }

    #[test]
    fn outside_workdir_asks_where_the_mode_allows_but_deny_stays() {
        assert_eq!(
            decide(Mode::Auto, &plan(Permission::Write, true), false),
            Verdict::Ask
        );
        assert_eq!(
            decide(Mode::Plan, &plan(Permission::Read, true), false),
            Verdict::Ask
        );
        assert_eq!(
            decide(Mode::Plan, &plan(Permission::Write, true), false),
            Verdict::Deny
        );
        assert_eq!(
            decide(Mode::Accept, &plan(Permission::Exec, true), false),
            Verdict::Ask
        );
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [Mode::Plan, Mode::Accept, Mode::Auto] {
            assert_eq!(Mode::parse(m.as_str()), Some(m));
        }
        assert_eq!(Mode::parse("yolo"), None);
    }
}
