//! Hyperliquid's WebSocket frames: any bytes as an incoming text frame, read by the
//! error and post channel classifier. Nothing panics.
#![no_main]

use ergon_core::{Budget, Spec};
use ergon_venues::hyperliquid_ws::{Config, HyperliquidWs};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut b = Budget::builder();
    let Ok(ip) = b.add("ip", Spec::gate()) else {
        return;
    };
    let Ok(mut ws) = HyperliquidWs::new(&mut b, ip, Config::default()) else {
        return;
    };
    let Ok(mut budget) = b.build(0) else {
        return;
    };
    let _ = ws.on_frame(data, &mut budget, 0);
});
