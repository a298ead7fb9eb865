//! Which runner of the sandbox chain confines (issue 10 item 14; SBX-04, SBX-07): where both
//! bubblewrap and a Landlock that enforces only part of the policy work, bubblewrap confines,
//! whatever order a row lists them in, because Landlock below ABI 10 has no UDP fence: a
//! datagram from a Landlock-confined command reaches the host, one from a bwrap-confined
//! command (its own network namespace) does not. `keel doctor` names the gap on its Landlock
//! line and says which runner the chain uses.

use std::net::UdpSocket;
use std::time::Duration;

use serde_json::{Value, json};

use keel_tests::model_server::Reply;

use crate::suite::agent_support::*;
use crate::suite::landlock::{env_with_sandbox, landlock_probe};

/// Runs one confined `shell` call that sends a UDP datagram to `udp`; returns the result's
/// `meta.sandbox` and the datagram received on the host, if any.
fn udp_from_a_confined_shell(sandbox_config: &str, udp: &UdpSocket) -> (Value, Option<String>) {
    let port = udp.local_addr().expect("addr").port();
    let server = server(vec![
        Reply::tool_calls(vec![(
            "u1",
            "shell",
            args(json!({"command": format!("printf leak > /dev/udp/127.0.0.1/{port}; true")})),
        )]),
        Reply::text("done"),
    ]);
    let env = env_with_sandbox(&server, sandbox_config);
    let (run, result) = run_json(&env, "send a datagram", &[]);
    run.expect_code(0);
    let tool_result = stored_events(&env, &session_of(&result))
        .into_iter()
        .find(|e| e["type"] == "tool/result")
        .expect("a tool/result");
    let mut buf = [0u8; 64];
    let received = udp
        .recv(&mut buf)
        .ok()
        .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned());
    (tool_result["data"]["meta"]["sandbox"].clone(), received)
}

#[test]
fn issue10_bubblewrap_is_preferred_to_a_partial_landlock_and_doctor_names_udp() {
    let Some((enforcement, abi)) = landlock_probe() else {
        return;
    };
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable here, so there is nothing to prefer");
        return;
    }
    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
    udp.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");

    for (label, config) in [
        ("the default chain", "{}"),
        (
            "Landlock listed first",
            r#"{ runners = ["landlock", "bwrap"] }"#,
        ),
    ] {
        let (sandbox, received) = udp_from_a_confined_shell(config, &udp);
        if enforcement == "full" && label == "Landlock listed first" {
            // Both enforce fully here: the row's order decides, and Landlock fences UDP.
            assert_eq!(sandbox["runner"], "landlock", "{label}: {sandbox}");
        } else {
            assert_eq!(sandbox["runner"], "bwrap", "{label}: {sandbox}");
        }
        assert_eq!(sandbox["enforcement"], "full", "{label}: {sandbox}");
        assert_eq!(
            received, None,
            "{label}: a confined command's UDP reached the host"
        );
    }

    // The gap itself, where this kernel has it: Landlock alone lets the datagram out.
    if enforcement == "partial" && abi < 10 {
        let (sandbox, received) = udp_from_a_confined_shell(r#"{ runners = ["landlock"] }"#, &udp);
        assert_eq!(sandbox["runner"], "landlock", "{sandbox}");
        assert_eq!(sandbox["enforcement"], "partial", "{sandbox}");
        assert_eq!(
            received.as_deref(),
            Some("leak"),
            "Landlock below ABI 10 fenced UDP: the doctor line below would be wrong"
        );
    }

    let env = agent_env(&server(vec![]), "");
    let doctor = env.keel(&["doctor", "--profile", "t"]);
    let line = |what: &str| {
        doctor
            .stdout
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("doctor has no {what:?} line:\n{}", doctor.stdout))
            .to_owned()
    };
    let runner = line("sandbox: runner:");
    assert!(
        runner.starts_with("ok") && runner.contains("bubblewrap"),
        "{runner}"
    );
    let landlock = line("sandbox: landlock:");
    assert!(
        landlock.contains(&format!("enforcement {enforcement}")),
        "{landlock}"
    );
    if abi < 10 {
        assert!(
            landlock.starts_with("warn")
                && landlock.contains("UDP from a confined command reaches the host"),
            "{landlock}"
        );
    }
}
