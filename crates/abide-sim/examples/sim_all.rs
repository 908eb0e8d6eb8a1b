//! Print every scenario's table (and plots with DIR):
//! `cargo run --release -p abide-sim --example sim_all [SEED [DIR]]`.

fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(42);
    for s in abide_sim::Scenario::ALL {
        let report = s.run(seed);
        println!("{report}");
        if let Some(dir) = std::env::args().nth(2) {
            let dir = std::path::Path::new(&dir);
            std::fs::create_dir_all(dir).expect("create plot directory");
            let path = abide_sim::plot::write_svg(&report, dir).expect("write plot");
            println!("plot: {}", path.display());
        }
    }
}
