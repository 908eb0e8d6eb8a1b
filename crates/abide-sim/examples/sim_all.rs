//! Print every scenario's table: `cargo run --release -p abide-sim --example sim_all [SEED]`.

fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(42);
    for s in abide_sim::Scenario::ALL {
        println!("{}", s.run(seed));
    }
}
