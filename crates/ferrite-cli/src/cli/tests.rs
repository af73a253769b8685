//! The command line's declarations and conversions: defaults, options, and the errors for
//! bad input.

use super::*;

fn parse_strs(args: &[&str]) -> Result<Action, UsageError> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    Cli::parse_args(&args)
}

/// The error of a command line that must fail, checked to contain `needle`.
#[track_caller]
fn fails(args: &[&str], needle: &str) -> UsageError {
    match parse_strs(args) {
        Err(e) => {
            assert!(e.to_string().contains(needle), "{args:?}: {e} lacks {needle:?}");
            e
        }
        Ok(action) => panic!("{args:?} parsed as {action:?}"),
    }
}

#[test]
fn declarations_are_consistent() {
    command().debug_assert();
}
