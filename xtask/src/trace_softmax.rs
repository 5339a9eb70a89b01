//! `cargo xtask trace-softmax 1.0 3.0 2.0 3.5 --values 1 2 3 4`: the online softmax recurrence,
//! one score at a time, in f64, the worked exercise of docs/softmax.md.
//!
//! After score `j` it prints the running max `m`, the rescale factor `c = exp(m_old - m_new)`
//! applied to everything accumulated so far, the new score's weight `exp(s_j - m_new)`, the running
//! sum `l` and the running weighted sum of values `o`; then `o / l` beside the softmax-weighted
//! average computed directly, and their difference.
//!
//! A masked score, `-inf`, carries no weight. On the command line write it as `-inf` among the
//! scores (`cargo xtask trace-softmax 1.0 -inf 2.0 --values 1 2 3`). clap alone would read `-inf`
//! as a cluster of flags, so [`escape_minus_infinity`] first rewrites it as `-1e999`, which clap
//! takes for a negative number and which parses as `-inf` (`-1e999` also works typed directly).

use std::fmt::Write as _;

/// Prints the online softmax recurrence one score at a time (f64): m, l, o and the rescale factor
/// after each, then o / l beside the directly computed softmax-weighted average.
#[derive(clap::Args, Debug, Clone)]
pub struct TraceSoftmaxArgs {
    /// The scores s_1 ... s_n, in order: finite numbers, or -inf for a masked one.
    #[arg(required = true, num_args = 1.., allow_negative_numbers = true, value_name = "SCORE")]
    pub scores: Vec<f64>,
    /// One value per score; a vector value is comma-separated: `--values 1,0 0,1 -2,2`. Takes
    /// everything after it, so it comes last.
    #[arg(
        long,
        required = true,
        num_args = 1..,
        allow_hyphen_values = true,
        value_name = "VALUE"
    )]
    pub values: Vec<String>,
}

/// The command line with every `-inf` after `trace-softmax` written `-1e999`: a negative number
/// to clap, `-inf` once parsed as f64.
pub fn escape_minus_infinity(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut after = false;
    args.into_iter()
        .map(|a| {
            after |= a == "trace-softmax";
            if after && a == "-inf" {
                "-1e999".to_string()
            } else {
                a
            }
        })
        .collect()
}

/// The state after one score.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The score folded in.
    pub score: f64,
    /// The running max before it.
    pub m_old: f64,
    /// The running max after it.
    pub m: f64,
    /// `exp(m_old - m)`: what the earlier `l` and `o` are multiplied by (0 before any score).
    pub rescale: f64,
    /// `exp(score - m)`: the new score's weight.
    pub weight: f64,
    /// Running sum of weights.
    pub l: f64,
    /// Running weighted sum of values.
    pub o: Vec<f64>,
}

/// `exp(x - m)` for `m >= x`, with the kernels' limits: 0 for `x = -inf`, 1 for `x = m`.
fn exp_shifted(x: f64, m: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        0.0
    } else if x == m {
        1.0
    } else {
        (x - m).exp()
    }
}

/// The online recurrence over `scores` and their `values` (all of one length):
///
/// ```text
/// m_j = max(m_{j-1}, s_j)            c_j = exp(m_{j-1} - m_j)
/// l_j = l_{j-1} c_j + exp(s_j - m_j)
/// o_j = o_{j-1} c_j + exp(s_j - m_j) v_j
/// ```
///
/// starting from `m_0 = -inf`, `l_0 = 0`, `o_0 = 0`.
pub fn online_trace(scores: &[f64], values: &[Vec<f64>]) -> Vec<Step> {
    let dim = values.first().map_or(0, Vec::len);
    let (mut m, mut l, mut o) = (f64::NEG_INFINITY, 0.0, vec![0.0; dim]);
    scores
        .iter()
        .zip(values)
        .map(|(&s, v)| {
            let m_old = m;
            m = m.max(s);
            let rescale = exp_shifted(m_old, m);
            let weight = exp_shifted(s, m);
            l = l * rescale + weight;
            for (oi, vi) in o.iter_mut().zip(v) {
                *oi = *oi * rescale + weight * vi;
            }
            Step {
                score: s,
                m_old,
                m,
                rescale,
                weight,
                l,
                o: o.clone(),
            }
        })
        .collect()
}

/// `sum_j softmax(s)_j v_j`, computed directly: the max first, then the weights, then the sum.
pub fn direct_average(scores: &[f64], values: &[Vec<f64>]) -> Vec<f64> {
    let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|&s| (s - m).exp()).collect();
    let total: f64 = weights.iter().sum();
    let dim = values.first().map_or(0, Vec::len);
    (0..dim)
        .map(|i| {
            weights
                .iter()
                .zip(values)
                .map(|(w, v)| w * v[i])
                .sum::<f64>()
                / total
        })
        .collect()
}

/// Parses `--values` (one per score, each a comma-separated vector of one length) and checks the
/// scores: finite or -inf, at least one of them finite.
pub fn parse_inputs(scores: &[f64], values: &[String]) -> Result<Vec<Vec<f64>>, String> {
    if scores.len() != values.len() {
        return Err(format!(
            "{} scores but {} values: give one value (or one comma-separated vector) per score",
            scores.len(),
            values.len()
        ));
    }
    for (j, &s) in scores.iter().enumerate() {
        if s.is_nan() || s == f64::INFINITY {
            return Err(format!(
                "score {} is {s}: the trace takes finite scores, or -inf for a masked one",
                j + 1
            ));
        }
    }
    if scores.iter().all(|&s| s == f64::NEG_INFINITY) {
        return Err("every score is -inf: there is no mass to average over".into());
    }
    let parsed = values
        .iter()
        .enumerate()
        .map(|(j, text)| {
            text.split(',')
                .map(|part| match part.trim().parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(v),
                    _ => Err(format!(
                        "value {} ('{text}'): '{part}' is not a finite number",
                        j + 1
                    )),
                })
                .collect::<Result<Vec<f64>, String>>()
        })
        .collect::<Result<Vec<_>, String>>()?;
    if let Some((j, v)) = parsed
        .iter()
        .enumerate()
        .find(|(_, v)| v.len() != parsed[0].len())
    {
        return Err(format!(
            "value {} has {} components but value 1 has {}: every value must have the same length",
            j + 1,
            v.len(),
            parsed[0].len()
        ));
    }
    Ok(parsed)
}

/// A vector as `[a, b]`, a scalar as itself.
fn show(v: &[f64], f: impl Fn(f64) -> String) -> String {
    match v {
        [x] => f(*x),
        _ => format!(
            "[{}]",
            v.iter().map(|&x| f(x)).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6}")
    } else {
        format!("{x}")
    }
}

/// The whole printout.
pub fn render(args: &TraceSoftmaxArgs) -> Result<String, String> {
    let values = parse_inputs(&args.scores, &args.values)?;
    let steps = online_trace(&args.scores, &values);
    let last = steps.last().expect("at least one score");
    let online: Vec<f64> = last.o.iter().map(|o| o / last.l).collect();
    let direct = direct_average(&args.scores, &values);
    let diff: Vec<f64> = online.iter().zip(&direct).map(|(a, b)| a - b).collect();

    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "online softmax, one score at a time (f64)");
    let _ = writeln!(w, "  m_j = max(m_{{j-1}}, s_j)");
    let _ = writeln!(
        w,
        "  c_j = exp(m_{{j-1}} - m_j)     rescales what came before"
    );
    let _ = writeln!(w, "  l_j = l_{{j-1}} c_j + exp(s_j - m_j)");
    let _ = writeln!(w, "  o_j = o_{{j-1}} c_j + exp(s_j - m_j) v_j");
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "{:>4}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  o_j",
        "j", "s_j", "v_j", "m_{j-1}", "m_j", "c_j", "exp(s-m)", "l_j"
    );
    for (j, (step, v)) in steps.iter().zip(&values).enumerate() {
        let _ = writeln!(
            w,
            "{:>4}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {}",
            j + 1,
            num(step.score),
            show(v, |x| format!("{x}")),
            num(step.m_old),
            num(step.m),
            num(step.rescale),
            num(step.weight),
            num(step.l),
            show(&step.o, num),
        );
    }
    let _ = writeln!(w);
    let sci = |x: f64| format!("{x:.3e}");
    let _ = writeln!(w, "o / l                        = {}", show(&online, num));
    let _ = writeln!(w, "sum_j softmax(s)_j v_j       = {}", show(&direct, num));
    let _ = writeln!(w, "difference                   = {}", show(&diff, sci));
    Ok(out)
}

/// Runs `trace-softmax`.
pub fn run(args: &TraceSoftmaxArgs) -> Result<(), String> {
    print!("{}", render(args)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: TraceSoftmaxArgs,
    }

    #[test]
    fn the_command_line_takes_minus_infinity_as_a_score() {
        use clap::Parser as _;
        let words = [
            "trace-softmax",
            "1.0",
            "-inf",
            "-2",
            "--values",
            "1",
            "-2",
            "3",
        ];
        let cli = Cli::try_parse_from(escape_minus_infinity(words.map(String::from)))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cli.args.scores, vec![1.0, f64::NEG_INFINITY, -2.0]);
        assert_eq!(cli.args.values, ["1", "-2", "3"]);
        let out = render(&cli.args).unwrap();
        assert!(out.contains("inf"), "{out}");
    }

    fn scalars(v: &[f64]) -> Vec<Vec<f64>> {
        v.iter().map(|&x| vec![x]).collect()
    }

    fn agree(scores: &[f64], values: &[Vec<f64>]) {
        let steps = online_trace(scores, values);
        let last = steps.last().unwrap();
        let direct = direct_average(scores, values);
        for (o, d) in last.o.iter().zip(&direct) {
            let online = o / last.l;
            assert!(
                (online - d).abs() <= 1e-12 * d.abs().max(1.0),
                "{scores:?}: o / l = {online}, direct {d}"
            );
        }
    }

    /// A small deterministic generator (64-bit LCG), so the random cases need no dependency.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn the_exercise_agrees_with_the_direct_formula() {
        agree(&[1.0, 3.0, 2.0, 3.5], &scalars(&[1.0, 2.0, 3.0, 4.0]));
    }

    #[test]
    fn random_scores_and_vector_values_agree() {
        let mut rng = Lcg(42);
        for case in 0..500 {
            let n = 1 + case % 17;
            let dim = 1 + case % 4;
            let spread = [0.1, 1.0, 10.0, 100.0][case % 4];
            let mut scores: Vec<f64> = (0..n).map(|_| spread * (2.0 * rng.next() - 1.0)).collect();
            if case % 5 == 0 && n > 1 {
                scores[case % n] = f64::NEG_INFINITY;
            }
            let values: Vec<Vec<f64>> = (0..n)
                .map(|_| (0..dim).map(|_| 10.0 * rng.next() - 5.0).collect())
                .collect();
            agree(&scores, &values);
        }
    }

    #[test]
    fn the_rescale_factor_is_below_one_exactly_when_the_max_grows() {
        let steps = online_trace(&[1.0, 3.0, 2.0, 3.5], &scalars(&[1.0, 2.0, 3.0, 4.0]));
        assert_eq!(
            steps[0].rescale, 0.0,
            "nothing to rescale before the first score"
        );
        for s in &steps[1..] {
            assert_eq!(s.rescale < 1.0, s.m > s.m_old, "{s:?}");
            assert!((s.rescale - (s.m_old - s.m).exp()).abs() < 1e-15);
        }
    }

    #[test]
    fn masked_scores_carry_no_weight() {
        let steps = online_trace(
            &[f64::NEG_INFINITY, 2.0, f64::NEG_INFINITY],
            &scalars(&[7.0, 3.0, 9.0]),
        );
        assert_eq!(steps[0].l, 0.0);
        assert_eq!(steps[2].l, steps[1].l);
        assert_eq!(steps[2].o[0] / steps[2].l, 3.0);
    }

    #[test]
    fn mismatched_or_malformed_inputs_are_refused() {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let err = parse_inputs(&[1.0, 2.0], &strings(&["1"])).unwrap_err();
        assert!(err.contains("2 scores but 1 values"), "{err}");
        let err = parse_inputs(&[1.0, 2.0], &strings(&["1,0", "1"])).unwrap_err();
        assert!(err.contains("value 2 has 1 components"), "{err}");
        let err = parse_inputs(&[1.0], &strings(&["1,x"])).unwrap_err();
        assert!(err.contains("'x' is not a finite number"), "{err}");
        let err = parse_inputs(&[f64::NAN], &strings(&["1"])).unwrap_err();
        assert!(err.contains("score 1 is NaN"), "{err}");
        let err = parse_inputs(&[f64::NEG_INFINITY], &strings(&["1"])).unwrap_err();
        assert!(err.contains("no mass"), "{err}");
        assert_eq!(
            parse_inputs(&[0.0, 1.0], &strings(&["1,-2", " 3, 4"])).unwrap(),
            vec![vec![1.0, -2.0], vec![3.0, 4.0]]
        );
    }

    #[test]
    fn render_prints_one_row_per_score_and_the_comparison() {
        let args = TraceSoftmaxArgs {
            scores: vec![1.0, 3.0, 2.0, 3.5],
            values: ["1", "2", "3", "4"].map(String::from).to_vec(),
        };
        let text = render(&args).unwrap();
        let rows = text
            .lines()
            .filter(|l| l.trim_start().starts_with(char::is_numeric))
            .count();
        assert_eq!(rows, 4, "{text}");
        assert!(
            text.contains("o / l") && text.contains("difference"),
            "{text}"
        );
    }
}
