//! The python screen's variable list, ordered by recent use.
//!
//! Most recently used first: after each command, the variables whose name
//! appears in the command text as a whole word (`\bname\b`) move to the
//! front of the list, in namespace order among themselves; the others keep
//! their order behind them. Names the command did not mention but that are
//! new (a star import, `exec`, `globals()[...]`) join at the end, so that an
//! import of hundreds of names cannot push the agent's own variables off the
//! screen. Names that left the namespace leave the list.
//!
//! This module only orders names the driver reported; it knows nothing of
//! processes or the screen's layout.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;

/// Most variables shown on the screen.
pub const MAX_SHOWN: usize = 100;

/// A variable as the screen shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub type_name: String,
}

/// The namespace's variables, most recently used first.
#[derive(Debug, Clone, Default)]
pub struct RecentVariables {
    order: Vec<Variable>,
}

/// Words as `\b` sees them: maximal runs of word characters.
static WORD: LazyLock<Regex> = LazyLock::new(|| match Regex::new(r"\w+") {
    Ok(regex) => regex,
    Err(err) => unreachable!("the word pattern is valid: {err}"),
});

impl RecentVariables {
    pub fn new() -> Self {
        RecentVariables::default()
    }

    /// Updates the order after `command` ran; `namespace` is every variable
    /// now defined, in namespace order.
    ///
    /// `\bname\b` matches exactly when `name` (itself all word characters)
    /// is one of the command's maximal word runs, so the command is split
    /// into words once instead of running one regex per variable.
    pub fn update(&mut self, command: &str, namespace: Vec<Variable>) {
        let words: HashSet<&str> = WORD.find_iter(command).map(|m| m.as_str()).collect();
        let mentioned = |name: &str| is_word(name) && words.contains(name);
        let previous: HashMap<&str, usize> = self
            .order
            .iter()
            .enumerate()
            .map(|(position, v)| (v.name.as_str(), position))
            .collect();

        let mut matches = Vec::new();
        let mut kept: Vec<(usize, Variable)> = Vec::new();
        let mut new = Vec::new();
        for variable in namespace {
            if mentioned(&variable.name) {
                matches.push(variable);
            } else if let Some(&position) = previous.get(variable.name.as_str()) {
                kept.push((position, variable));
            } else {
                new.push(variable);
            }
        }
        kept.sort_by_key(|(position, _)| *position);

        let mut order = matches;
        order.extend(kept.into_iter().map(|(_, v)| v));
        order.extend(new);
        self.order = order;
    }

    /// Forgets everything (a fresh interpreter).
    pub fn clear(&mut self) {
        self.order.clear();
    }

    /// The first `limit` variables and how many more there are.
    pub fn shown(&self, limit: usize) -> (&[Variable], usize) {
        let shown = self.order.len().min(limit);
        (&self.order[..shown], self.order.len() - shown)
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

fn is_word(name: &str) -> bool {
    WORD.find(name)
        .is_some_and(|m| m.start() == 0 && m.end() == name.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<Variable> {
        names
            .iter()
            .map(|n| Variable {
                name: (*n).to_owned(),
                type_name: "int".to_owned(),
            })
            .collect()
    }

    fn names(recent: &RecentVariables) -> Vec<&str> {
        recent
            .shown(usize::MAX)
            .0
            .iter()
            .map(|v| v.name.as_str())
            .collect()
    }

    #[test]
    fn mentioned_variables_move_to_the_front() {
        let mut recent = RecentVariables::new();
        recent.update("a = 1", vars(&["a"]));
        recent.update("b = 2", vars(&["a", "b"]));
        recent.update("c = 3", vars(&["a", "b", "c"]));
        assert_eq!(names(&recent), ["c", "b", "a"]);
        recent.update("print(a)", vars(&["a", "b", "c"]));
        assert_eq!(names(&recent), ["a", "c", "b"]);
        // Matches among themselves follow namespace order.
        recent.update("b + c", vars(&["a", "b", "c"]));
        assert_eq!(names(&recent), ["b", "c", "a"]);
    }

    #[test]
    fn whole_words_only() {
        let mut recent = RecentVariables::new();
        recent.update("x = 1; xy = 2; y = 3", vars(&["x", "xy", "y"]));
        recent.update("z = 0", vars(&["x", "xy", "y", "z"]));
        recent.update("print(xy_total, obj.y)", vars(&["x", "xy", "y", "z"]));
        // `xy_total` is one word (no match for xy); `obj.y` mentions y.
        assert_eq!(names(&recent), ["y", "z", "x", "xy"]);
    }

    #[test]
    fn unmentioned_new_names_join_at_the_end_and_deleted_ones_leave() {
        let mut recent = RecentVariables::new();
        recent.update("data = 1", vars(&["data"]));
        recent.update("from math import *", vars(&["data", "pi", "e"]));
        assert_eq!(names(&recent), ["data", "pi", "e"]);
        recent.update("del data", vars(&["pi", "e"]));
        assert_eq!(names(&recent), ["pi", "e"]);
    }

    #[test]
    fn types_follow_the_latest_report() {
        let mut recent = RecentVariables::new();
        recent.update("x = 1", vars(&["x"]));
        let mut changed = vars(&["x"]);
        changed[0].type_name = "str".to_owned();
        recent.update("pass", changed);
        assert_eq!(recent.shown(10).0[0].type_name, "str");
    }

    #[test]
    fn at_most_the_limit_is_shown() {
        let mut recent = RecentVariables::new();
        let many: Vec<String> = (0..150).map(|i| format!("v{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        recent.update("", vars(&many));
        let (shown, hidden) = recent.shown(MAX_SHOWN);
        assert_eq!(shown.len(), 100);
        assert_eq!(hidden, 50);
        assert_eq!(shown[0].name, "v0");
    }

    #[test]
    fn unicode_names_match_as_words() {
        let mut recent = RecentVariables::new();
        recent.update("données = 1; a = 2", vars(&["données", "a"]));
        recent.update("a", vars(&["données", "a"]));
        recent.update("print(données)", vars(&["données", "a"]));
        assert_eq!(names(&recent), ["données", "a"]);
    }
}
