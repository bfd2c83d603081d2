//! An error and its causes on one line, each cause once.
//!
//! Errors here keep their cause as `source` *and* often name it in their
//! own message, so that a message shown alone (a log field, a partition's
//! stop reason) still says why. anyhow's `{:#}` then prints the cause twice
//! (`cannot read properties file /x: No such file or directory (os error 2):
//! No such file or directory (os error 2)`). [`one_line`] skips a cause the
//! message before it already ends with.

/// `error` and its causes, joined by `": "`, without repeating a cause the
/// previous message already contains at its end.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read properties file /x: {source}")]
    struct ReadError {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_named_in_its_message_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let error = anyhow::Error::new(ReadError { source: io });
        assert_eq!(
            one_line(&error),
            "cannot read properties file /x: no such file"
        );
    }

    #[test]
    fn causes_not_in_the_message_are_all_kept() {
        let error = anyhow::anyhow!("disk full")
            .context("writing state")
            .context("stopping");
        assert_eq!(one_line(&error), "stopping: writing state: disk full");
    }
}
