//! SMPP 3.4 `command_status` values (SMPP v3.4 specification, §5.1.3 "command_status",
//! Table 5-2 "Error Codes"), and the default class of each.

use super::verdict::VerdictClass;

/// 0x00000000 No Error.
pub const ESME_ROK: u32 = 0x0000_0000;
/// 0x00000001 Message Length is invalid.
pub const ESME_RINVMSGLEN: u32 = 0x0000_0001;
/// 0x00000002 Command Length is invalid.
pub const ESME_RINVCMDLEN: u32 = 0x0000_0002;
/// 0x00000003 Invalid Command ID.
pub const ESME_RINVCMDID: u32 = 0x0000_0003;
/// 0x00000004 Incorrect BIND Status for given command.
pub const ESME_RINVBNDSTS: u32 = 0x0000_0004;
/// 0x00000005 ESME Already in Bound State.
pub const ESME_RALYBND: u32 = 0x0000_0005;
/// 0x00000008 System Error.
pub const ESME_RSYSERR: u32 = 0x0000_0008;
/// 0x0000000A Invalid Source Address.
pub const ESME_RINVSRCADR: u32 = 0x0000_000A;
/// 0x0000000B Invalid Dest Addr.
pub const ESME_RINVDSTADR: u32 = 0x0000_000B;
/// 0x0000000C Message ID is invalid.
pub const ESME_RINVMSGID: u32 = 0x0000_000C;
/// 0x0000000D Bind Failed.
pub const ESME_RBINDFAIL: u32 = 0x0000_000D;
/// 0x0000000E Invalid Password.
pub const ESME_RINVPASWD: u32 = 0x0000_000E;
/// 0x0000000F Invalid System ID.
pub const ESME_RINVSYSID: u32 = 0x0000_000F;
/// 0x00000014 Message Queue Full.
pub const ESME_RMSGQFUL: u32 = 0x0000_0014;
/// 0x00000043 Invalid esm_class field data.
pub const ESME_RINVESMCLASS: u32 = 0x0000_0043;
/// 0x00000045 submit_sm or submit_multi failed.
pub const ESME_RSUBMITFAIL: u32 = 0x0000_0045;
/// 0x00000048 Invalid Source address TON.
pub const ESME_RINVSRCTON: u32 = 0x0000_0048;
/// 0x00000049 Invalid Source address NPI.
pub const ESME_RINVSRCNPI: u32 = 0x0000_0049;
/// 0x00000050 Invalid Destination address TON.
pub const ESME_RINVDSTTON: u32 = 0x0000_0050;
/// 0x00000051 Invalid Destination address NPI.
pub const ESME_RINVDSTNPI: u32 = 0x0000_0051;
/// 0x00000058 Throttling error (ESME has exceeded allowed message limits).
pub const ESME_RTHROTTLED: u32 = 0x0000_0058;
/// 0x00000061 Invalid Scheduled Delivery Time.
pub const ESME_RINVSCHED: u32 = 0x0000_0061;
/// 0x00000062 Invalid message validity period (Expiry time).
pub const ESME_RINVEXPIRY: u32 = 0x0000_0062;
/// 0x00000064 ESME Receiver Temporary App Error Code.
pub const ESME_RX_T_APPN: u32 = 0x0000_0064;
/// 0x00000065 ESME Receiver Permanent App Error Code.
pub const ESME_RX_P_APPN: u32 = 0x0000_0065;
/// 0x00000066 ESME Receiver Reject Message Error Code.
pub const ESME_RX_R_APPN: u32 = 0x0000_0066;
/// 0x000000FF Unknown Error.
pub const ESME_RUNKNOWNERR: u32 = 0x0000_00FF;

/// Every named code with its default class.
///
/// Decisions worth knowing:
/// - `ESME_RINVPASWD` / `ESME_RINVSYSID` come back on a bind: like HTTP 401 they mean
///   "not with these credentials", so [`VerdictClass::RefreshCredentials`] (re-read the
///   secret and rebind once; the caller turns a second failure into terminal).
/// - `ESME_RSUBMITFAIL` is a catch-all that SMSCs return for transient and permanent
///   causes alike, so it is [`VerdictClass::Unknown`] (retried with a low cap, flagged);
///   override it per provider once its meaning there is known.
/// - `ESME_RSYSERR` and `ESME_RX_T_APPN` are transient by definition: retry.
/// - `ESME_RINVBNDSTS`, `ESME_RALYBND`, `ESME_RBINDFAIL`, `ESME_RUNKNOWNERR`: session
///   or vague; unknown.
pub const TABLE: &[(u32, &str, VerdictClass)] = &[
    (ESME_ROK, "ESME_ROK", VerdictClass::Success),
    (ESME_RINVMSGLEN, "ESME_RINVMSGLEN", VerdictClass::Terminal),
    (ESME_RINVCMDLEN, "ESME_RINVCMDLEN", VerdictClass::Terminal),
    (ESME_RINVCMDID, "ESME_RINVCMDID", VerdictClass::Terminal),
    (ESME_RINVBNDSTS, "ESME_RINVBNDSTS", VerdictClass::Unknown),
    (ESME_RALYBND, "ESME_RALYBND", VerdictClass::Unknown),
    (ESME_RSYSERR, "ESME_RSYSERR", VerdictClass::Retry),
    (ESME_RINVSRCADR, "ESME_RINVSRCADR", VerdictClass::Terminal),
    (ESME_RINVDSTADR, "ESME_RINVDSTADR", VerdictClass::Terminal),
    (ESME_RINVMSGID, "ESME_RINVMSGID", VerdictClass::Terminal),
    (ESME_RBINDFAIL, "ESME_RBINDFAIL", VerdictClass::Unknown),
    (
        ESME_RINVPASWD,
        "ESME_RINVPASWD",
        VerdictClass::RefreshCredentials,
    ),
    (
        ESME_RINVSYSID,
        "ESME_RINVSYSID",
        VerdictClass::RefreshCredentials,
    ),
    (ESME_RMSGQFUL, "ESME_RMSGQFUL", VerdictClass::Throttle),
    (
        ESME_RINVESMCLASS,
        "ESME_RINVESMCLASS",
        VerdictClass::Terminal,
    ),
    (ESME_RSUBMITFAIL, "ESME_RSUBMITFAIL", VerdictClass::Unknown),
    (ESME_RINVSRCTON, "ESME_RINVSRCTON", VerdictClass::Terminal),
    (ESME_RINVSRCNPI, "ESME_RINVSRCNPI", VerdictClass::Terminal),
    (ESME_RINVDSTTON, "ESME_RINVDSTTON", VerdictClass::Terminal),
    (ESME_RINVDSTNPI, "ESME_RINVDSTNPI", VerdictClass::Terminal),
    (ESME_RTHROTTLED, "ESME_RTHROTTLED", VerdictClass::Throttle),
    (ESME_RINVSCHED, "ESME_RINVSCHED", VerdictClass::Terminal),
    (ESME_RINVEXPIRY, "ESME_RINVEXPIRY", VerdictClass::Terminal),
    (ESME_RX_T_APPN, "ESME_RX_T_APPN", VerdictClass::Retry),
    (ESME_RX_P_APPN, "ESME_RX_P_APPN", VerdictClass::Terminal),
    (ESME_RX_R_APPN, "ESME_RX_R_APPN", VerdictClass::Terminal),
    (ESME_RUNKNOWNERR, "ESME_RUNKNOWNERR", VerdictClass::Unknown),
];

/// The spec name of `code` (e.g. `"ESME_RTHROTTLED"`), if it is in [`TABLE`].
pub fn name(code: u32) -> Option<&'static str> {
    TABLE.iter().find(|e| e.0 == code).map(|e| e.1)
}

/// The default class of `code`: from [`TABLE`], [`VerdictClass::Unknown`] otherwise.
pub fn default_class(code: u32) -> VerdictClass {
    TABLE
        .iter()
        .find(|e| e.0 == code)
        .map_or(VerdictClass::Unknown, |e| e.2)
}

/// A `command_status` as people write it: `0x58` (or `0X58`) hex, or `88` decimal, with
/// surrounding whitespace ignored; `None` for anything else or a value above `u32`.
///
/// # Examples
/// ```
/// use abide_core::classify::smpp::parse_command_status;
///
/// assert_eq!(parse_command_status("0x58"), Some(0x58));
/// assert_eq!(parse_command_status(" 88 "), Some(88));
/// assert_eq!(parse_command_status("throttled"), None);
/// ```
pub fn parse_command_status(s: &str) -> Option<u32> {
    let t = s.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}
