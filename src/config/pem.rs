//! Reformatting inline PEM text from Java properties into what OpenSSL reads.
//!
//! Java's `ssl.truststore.certificates`, `ssl.keystore.certificate.chain` and
//! `ssl.keystore.key` hold PEM text inside a properties value. Properties line
//! continuations join lines *without* a line break, and Java's PEM parser ignores
//! whitespace, so working Java files often hold a whole certificate on one line. OpenSSL
//! (behind librdkafka's `ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`) needs the
//! `-----BEGIN-----` / base64 / `-----END-----` lines; this module rebuilds them.

/// Rebuilds every PEM block in `text` with standard line breaks (64 base64 characters per
/// line). Text outside the blocks is dropped, as Java's parser drops it.
///
/// Errors describe the problem without quoting the text, which may be a private key.
pub fn normalize(text: &str) -> Result<String, String> {
    // The longest label in use, `ENCRYPTED PRIVATE KEY`, has 21 characters.
    const MAX_LABEL: usize = 40;
    const BEGIN: &str = "-----BEGIN ";
    const DASHES: &str = "-----";
    let mut out = String::with_capacity(text.len() + text.len() / 64 + 64);
    let mut rest = text;
    while let Some(begin) = rest.find(BEGIN) {
        let after_begin = &rest[begin + BEGIN.len()..];
        let label_len = after_begin
            .find(DASHES)
            .ok_or("a `-----BEGIN ` marker is not closed by `-----`")?;
        let label = &after_begin[..label_len];
        if label.trim().is_empty() || label.contains(['\n', '\r']) {
            return Err("a `-----BEGIN ` marker has no label such as CERTIFICATE".into());
        }
        // A label runs to the next five dashes: past a damaged marker it would
        // hold the key itself, which the errors below quote.
        let plain_label = |c: char| c.is_ascii_alphanumeric() || c == ' ';
        if label.len() > MAX_LABEL || !label.chars().all(plain_label) {
            return Err(
                "a `-----BEGIN ` marker is damaged: its label (such as CERTIFICATE) is not \
                 followed by five dashes"
                    .into(),
            );
        }
        let after_label = &after_begin[label_len + DASHES.len()..];
        let end_marker = format!("-----END {label}-----");
        let body_len = after_label
            .find(&end_marker)
            .ok_or_else(|| format!("`-----BEGIN {label}-----` has no matching `{end_marker}`"))?;
        let body: String = after_label[..body_len]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let is_base64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
        if body.is_empty() || !body.chars().all(is_base64) {
            return Err(format!(
                "the `{label}` block is not plain base64 (PEM headers such as `Proc-Type` of \
                 legacy encrypted keys are not supported; use PKCS#8 `ENCRYPTED PRIVATE KEY`)"
            ));
        }
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for chunk in body.as_bytes().chunks(64) {
            // base64 is ASCII, so every chunk is valid UTF-8.
            out.push_str(&String::from_utf8_lossy(chunk));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &after_label[body_len + end_marker.len()..];
    }
    if out.is_empty() {
        return Err("no PEM block (`-----BEGIN ...-----`) found".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str =
        "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk=";

    #[test]
    fn single_line_pem_is_rewrapped() {
        let text = format!("-----BEGIN CERTIFICATE----- {BODY} -----END CERTIFICATE-----");
        let got = normalize(&text).unwrap();
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines[0], "-----BEGIN CERTIFICATE-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(format!("{}{}", lines[1], lines[2]), BODY);
        assert_eq!(lines[3], "-----END CERTIFICATE-----");
        assert!(got.ends_with('\n'));
    }

    #[test]
    fn several_blocks_and_surrounding_text() {
        let text = format!(
            "Bag Attributes\n-----BEGIN CERTIFICATE-----\n{BODY}\n-----END CERTIFICATE-----\n\
             junk -----BEGIN PRIVATE KEY-----\n{BODY}\n-----END PRIVATE KEY-----"
        );
        let got = normalize(&text).unwrap();
        assert_eq!(got.matches("-----BEGIN").count(), 2);
        assert!(got.contains("-----BEGIN PRIVATE KEY-----\n"));
        assert!(!got.contains("junk") && !got.contains("Bag"));
    }

    #[test]
    fn problems_are_reported_without_content() {
        assert!(normalize("MIIB secret")
            .unwrap_err()
            .contains("no PEM block"));
        let unclosed = normalize("-----BEGIN CERTIFICATE----- QUJD").unwrap_err();
        assert!(
            unclosed.contains("no matching `-----END CERTIFICATE-----`"),
            "{unclosed}"
        );
        let legacy = normalize(
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nQUJD\n-----END RSA PRIVATE KEY-----",
        )
        .unwrap_err();
        assert!(legacy.contains("not plain base64"), "{legacy}");
        assert!(!legacy.contains("QUJD"));
        // Four dashes after BEGIN: the label would run into the key.
        let damaged =
            normalize("-----BEGIN PRIVATE KEY---- MIIEvQSECRET -----END PRIVATE KEY-----")
                .unwrap_err();
        assert!(damaged.contains("marker is damaged"), "{damaged}");
        assert!(!damaged.contains("MIIEvQSECRET"), "{damaged}");
    }
}
