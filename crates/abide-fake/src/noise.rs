//! Refusals whatever the rate: which requests [`Behaviour::throttle_fraction`] picks, on
//! the HTTP listener and the SMSC alike (each keeps its own [`Picker`]).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{Behaviour, Spread};

/// Picks the requests refused whatever the rate, as the behaviour in force says.
#[derive(Debug, Default)]
pub(crate) struct Picker {
    /// The even spread's accumulator: gains the fraction per request.
    acc: f64,
    /// The random spread's stream and the seed it was started from.
    rng: Option<(u64, ChaCha8Rng)>,
}

impl Picker {
    /// Is this request (the next one) refused under `b`?
    pub(crate) fn picks(&mut self, b: &Behaviour) -> bool {
        let f = b.throttle_fraction;
        if f.is_nan() || f <= 0.0 {
            return false;
        }
        match b.throttle_spread {
            Spread::Even => {
                self.acc += f;
                let picked = self.acc >= 1.0 - 1e-9;
                if picked {
                    self.acc -= 1.0;
                }
                picked
            }
            Spread::Random => {
                let seed = b.throttle_seed;
                if self.rng.as_ref().is_none_or(|(s, _)| *s != seed) {
                    self.rng = Some((seed, ChaCha8Rng::seed_from_u64(seed)));
                }
                self.rng
                    .as_mut()
                    .is_some_and(|(_, r)| r.random_bool(f.min(1.0)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn behaviour(f: f64, spread: Spread, seed: u64) -> Behaviour {
        Behaviour {
            throttle_fraction: f,
            throttle_spread: spread,
            throttle_seed: seed,
            ..Behaviour::default()
        }
    }

    fn draw(p: &mut Picker, b: &Behaviour, n: usize) -> Vec<bool> {
        (0..n).map(|_| p.picks(b)).collect()
    }

    #[test]
    fn the_even_spread_picks_every_twentieth() {
        let b = behaviour(0.05, Spread::Even, 0);
        let picks = draw(&mut Picker::default(), &b, 100);
        let at: Vec<usize> = (0..100).filter(|i| picks[*i]).collect();
        assert_eq!(at, [19, 39, 59, 79, 99]);
        assert!(!Picker::default().picks(&behaviour(0.0, Spread::Random, 1)));
        assert!(Picker::default().picks(&behaviour(1.0, Spread::Random, 1)));
    }

    #[test]
    fn the_random_spread_keeps_its_share_and_its_seed() {
        let b = behaviour(0.05, Spread::Random, 7);
        let picks = draw(&mut Picker::default(), &b, 20_000);
        let n = picks.iter().filter(|p| **p).count();
        // 1,000 expected; the standard deviation is about 31.
        assert!((880..=1120).contains(&n), "{n} of 20,000");
        // Not evenly spread: some gaps are far shorter than 20, some far longer.
        let at: Vec<usize> = (0..picks.len()).filter(|i| picks[*i]).collect();
        let gaps: Vec<usize> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().any(|g| *g <= 2) && gaps.iter().any(|g| *g >= 60));
        // Reproducible: the same seed draws the same picks; another seed others.
        assert_eq!(draw(&mut Picker::default(), &b, 20_000), picks);
        let other = draw(
            &mut Picker::default(),
            &behaviour(0.05, Spread::Random, 8),
            20_000,
        );
        assert_ne!(other, picks);
        // A change of seed starts the stream again from it.
        let mut p = Picker::default();
        draw(&mut p, &behaviour(0.05, Spread::Random, 8), 500);
        assert_eq!(draw(&mut p, &b, 20_000), picks);
    }
}
