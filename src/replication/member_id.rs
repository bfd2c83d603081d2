//! A fleet member's client id: what the fleet's group description shows
//! of each instance. It names the instance (its position records carry the
//! same id), so `eosmirror status` can tell which instance owns a lane,
//! and the fingerprint of its shared options (see [`super::selection`]),
//! so instances can compare them.

/// The fleet member's client id: the configured one (or `eosmirror`)
/// followed by `.selection-<fingerprint>.instance-<id in hex>`. The
/// group's description shows each member's client id and assigned lanes,
/// which is how `eosmirror status` names the instance that owns a lane and
/// how instances compare their topic selections.
pub fn fleet_client_id(configured: Option<&str>, selection: &str, instance: u64) -> String {
    format!(
        "{}{SELECTION_MARK}{selection}{INSTANCE_MARK}{instance:016x}",
        configured.unwrap_or("eosmirror"),
    )
}

/// Separates the configured client id from the selection's fingerprint.
const SELECTION_MARK: &str = ".selection-";

/// Separates the selection's fingerprint from the instance id.
const INSTANCE_MARK: &str = ".instance-";

/// The instance id in a fleet member's client id, if it has one.
pub fn instance_of_client_id(client_id: &str) -> Option<u64> {
    let (_, hex) = client_id.rsplit_once(INSTANCE_MARK)?;
    u64::from_str_radix(hex, 16).ok()
}

/// The selection's fingerprint (8 hex digits) in a fleet member's client
/// id, if it has one: a configured client id that merely contains the mark
/// (`mirror.selection-eu`) is no fingerprint.
pub fn selection_of_client_id(client_id: &str) -> Option<&str> {
    let (before, _) = client_id.rsplit_once(INSTANCE_MARK)?;
    let (_, selection) = before.rsplit_once(SELECTION_MARK)?;
    (selection.len() == 8 && selection.bytes().all(|b| b.is_ascii_hexdigit())).then_some(selection)
}

/// A fleet member as reports name it: `instance-<id>@<host>`, or its
/// client id if it is not an eosmirror instance.
pub fn describe_member(client_id: &str, host: &str) -> String {
    match instance_of_client_id(client_id) {
        Some(instance) => format!("instance-{instance:016x}@{host}"),
        None => format!("{client_id}@{host}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instance_and_selection_are_read_back_from_the_member_client_id() {
        let all = "0123abcd";
        let id = fleet_client_id(None, all, 0x00ab_cdef_0123_4567);
        assert_eq!(
            id,
            format!("eosmirror.selection-{}.instance-00abcdef01234567", all)
        );
        assert_eq!(instance_of_client_id(&id), Some(0x00ab_cdef_0123_4567));
        assert_eq!(selection_of_client_id(&id), Some(all));
        let configured = fleet_client_id(Some("mirror.selection-x.instance-x"), all, 5);
        assert_eq!(instance_of_client_id(&configured), Some(5));
        assert_eq!(selection_of_client_id(&configured), Some(all));
        assert_eq!(instance_of_client_id("rdkafka"), None);
        assert_eq!(selection_of_client_id("rdkafka"), None);
        assert_eq!(selection_of_client_id("eosmirror.instance-05"), None);
        assert_eq!(
            selection_of_client_id("mirror.selection-eu.instance-0000000000000005"),
            None
        );
        assert_eq!(
            describe_member(&configured, "/10.0.0.1"),
            "instance-0000000000000005@/10.0.0.1"
        );
        assert_eq!(describe_member("rdkafka", "/10.0.0.1"), "rdkafka@/10.0.0.1");
    }
}
