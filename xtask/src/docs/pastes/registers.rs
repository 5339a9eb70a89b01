//! Register counts the chapters copy from `cargo xtask ptxas`: in a table with a column headed
//! `registers`, a row that names kernels in its first cell must give, in that column, the count
//! ptxas printed for each, in order (`/` between several). A kernel's registers move whenever its
//! code or the compiler does, and occupancy, the blocks per SM and the bytes in flight the
//! chapters derive from them move with it.
//!
//! A name in the first cell that ptxas did not build (a shorthand such as `_d128`) is refused:
//! the check can only hold a row to counts it can find, so each kernel is named in full, or as
//! `softmax_fused_{f32,bf16}` for several that share one count.
//!
//! A column headed `blocks per SM` is held the same way to the blocks the occupancy table of
//! `cargo xtask ptxas` printed for each kernel (the one headed `kernel threads smem (B) blocks`),
//! so that a block count a chapter derives from the registers moves with them.

use std::collections::BTreeMap;

use super::prose::table_rows;

/// Each kernel's register count from the first table `cargo xtask ptxas` prints (the one headed
/// `kernel  regs ...`), up to the blank line that ends it.
fn printed_registers(ptxas_output: &str) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    let mut lines = ptxas_output.lines().skip_while(|l| {
        let mut words = l.split_whitespace();
        !(words.next() == Some("kernel") && words.next() == Some("regs"))
    });
    lines.next();
    for line in lines.take_while(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        if let (Some(name), Some(Ok(regs))) = (words.next(), words.next().map(str::parse)) {
            counts.insert(name.to_string(), regs);
        }
    }
    counts
}

/// Each kernel's blocks per SM from the occupancy table `cargo xtask ptxas` prints after the
/// register table (headed `kernel threads smem (B) blocks ...`), up to the blank line that ends it.
fn printed_blocks(ptxas_output: &str) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    let mut lines = ptxas_output.lines().skip_while(|l| {
        let words: Vec<&str> = l.split_whitespace().take(5).collect();
        words != ["kernel", "threads", "smem", "(B)", "blocks"]
    });
    lines.next();
    for line in lines.take_while(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let (Some(name), Some(Ok(blocks))) = (words.first(), words.get(3).map(|w| w.parse())) {
            counts.insert(name.to_string(), blocks);
        }
    }
    counts
}

/// The kernels a name stands for: `softmax_fused_{f32,bf16}` is two, any other name itself.
fn expand(name: &str) -> Vec<String> {
    match (name.split_once('{'), name.split_once('}')) {
        (Some((head, _)), Some((inner, tail))) if inner.len() > head.len() => inner
            [head.len() + 1..]
            .split(',')
            .map(|choice| format!("{head}{choice}{tail}"))
            .collect(),
        _ => vec![name.to_string()],
    }
}

/// The whole numbers written in `cell`, in order.
fn numbers(cell: &str) -> Vec<u32> {
    cell.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// `Err` listing each row of `markdown` (named `file`) whose `registers` column disagrees with
/// `ptxas_output` or names a kernel ptxas did not build; `Ok` with how many rows were checked.
pub fn check(file: &str, markdown: &str, ptxas_output: &str) -> Result<usize, String> {
    let printed = printed_registers(ptxas_output);
    let blocks = printed_blocks(ptxas_output);
    if printed.is_empty() {
        // An excerpt of ptxas's output without its register table: nothing to hold rows to.
        return Ok(0);
    }
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (line, header, row, cells) in table_rows(markdown) {
        let Some(column) = header
            .iter()
            .position(|h| h.eq_ignore_ascii_case("registers"))
        else {
            continue;
        };
        let (Some(first), Some(cell)) = (cells.first(), cells.get(column)) else {
            continue;
        };
        let names: Vec<&str> = first.split('`').skip(1).step_by(2).collect();
        if names.is_empty() {
            continue;
        }
        checked += 1;
        let mut expected = Vec::new();
        for name in &names {
            let counts: Vec<Option<u32>> = expand(name)
                .iter()
                .map(|k| printed.get(k).copied())
                .collect();
            match counts[..] {
                [Some(regs), ..] if counts.iter().all(|c| *c == Some(regs)) => expected.push(regs),
                _ if counts.contains(&None) => wrong.push(format!(
                    "{file}:{line}: `{name}` is not a kernel `cargo xtask ptxas` printed registers for (name each kernel in full):\n  {row}"
                )),
                _ => wrong.push(format!(
                    "{file}:{line}: the kernels of `{name}` do not share one register count in `cargo xtask ptxas`: give each its own:\n  {row}"
                )),
            }
        }
        if expected.len() == names.len() && numbers(cell) != expected {
            let want: Vec<String> = expected.iter().map(u32::to_string).collect();
            wrong.push(format!(
                "{file}:{line}: registers `{cell}`, but `cargo xtask ptxas` printed {}:\n  {row}",
                want.join(" / ")
            ));
        }
        // The blocks per SM those registers allow, as the occupancy table printed them.
        let blocks_column = header
            .iter()
            .position(|h| h.to_lowercase().starts_with("blocks per sm"));
        if let (Some(column), false) = (blocks_column, blocks.is_empty()) {
            let cell = cells.get(column).map_or("", String::as_str);
            let want: Option<Vec<u32>> = names
                .iter()
                .map(|name| {
                    let each: Vec<Option<u32>> = expand(name)
                        .iter()
                        .map(|k| blocks.get(k).copied())
                        .collect();
                    match each[..] {
                        [Some(b), ..] if each.iter().all(|c| *c == Some(b)) => Some(b),
                        _ => None,
                    }
                })
                .collect();
            match want {
                Some(want) if numbers(cell) == want => {}
                Some(want) => {
                    let want: Vec<String> = want.iter().map(u32::to_string).collect();
                    wrong.push(format!(
                        "{file}:{line}: blocks per SM `{cell}`, but `cargo xtask ptxas`'s occupancy table printed {}:\n  {row}",
                        want.join(" / ")
                    ));
                }
                None => wrong.push(format!(
                    "{file}:{line}: a kernel of this row has no one block count in `cargo xtask ptxas`'s occupancy table:\n  {row}"
                )),
            }
        }
    }
    if wrong.is_empty() {
        Ok(checked)
    } else {
        Err(wrong.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTXAS: &str = "\
ptxas -arch=sm_90 on 3 kernels
kernel                              regs   smem (B)   stack spill st (B) spill ld (B)
gemv_bf16_m1                          48       2048       0            0           0
flash_attention_bf16_d64             128          0       0            0           0
flash_attention_bf16_d128            192          0       0            0           0

kernel                             threads   smem (B) blocks  warps   occ.  limited by
gemv_bf16_m1                           256       2048      5     40    62%  registers
flash_attention_bf16_d64               128          0      4     16    25%  registers
flash_attention_bf16_d128              128          0      2      8    12%  registers
";

    #[test]
    fn a_registers_column_must_give_what_ptxas_printed() {
        let table = "\
| kernel | registers | blocks per SM |
|---|---|---|
| `gemv_bf16_m1` | 48 | 5 |
| `flash_attention_bf16_d64` / `flash_attention_bf16_d128` | 128 / 192 | 4 / 2 |
| all kernels | 0 spills | |
";
        assert_eq!(check("a.md", table, PTXAS), Ok(2));
        // The planted drift: the kernel changed, the chapter kept its old count.
        let stale = table.replace("128 / 192", "128 / 225");
        let err = check("b.md", &stale, PTXAS).unwrap_err();
        assert!(
            err.contains(
                "b.md:4: registers `128 / 225`, but `cargo xtask ptxas` printed 128 / 192"
            ),
            "{err}"
        );
        // The occupancy table's 256 threads are not registers.
        assert_eq!(printed_registers(PTXAS)["gemv_bf16_m1"], 48);
        // The planted drift of a block count: the registers grew, an SM holds fewer blocks, the
        // chapter kept the old number.
        let stale = table.replace("| 48 | 5 |", "| 48 | 6 |");
        let err = check("h.md", &stale, PTXAS).unwrap_err();
        assert!(
            err.contains(
                "h.md:3: blocks per SM `6`, but `cargo xtask ptxas`'s occupancy table printed 5"
            ),
            "{err}"
        );
        assert_eq!(printed_blocks(PTXAS)["flash_attention_bf16_d128"], 2);
        // Without the occupancy table (an excerpt of the output) the column is left alone.
        let registers_only = PTXAS.split("\n\n").next().unwrap();
        assert_eq!(check("i.md", &stale, registers_only), Ok(2));
    }

    #[test]
    fn a_shorthand_name_is_refused_and_other_columns_are_left_alone() {
        let shorthand = "\
| kernel | registers |
|---|---|
| `flash_attention_bf16_d64` / `_d128` | 128 / 192 |
";
        let err = check("c.md", shorthand, PTXAS).unwrap_err();
        assert!(err.contains("`_d128` is not a kernel"), "{err}");
        let braces =
            "| kernel | registers |\n|---|---|\n| `flash_attention_bf16_{d64,d128}` | 128 |\n";
        let err = check("e.md", braces, PTXAS).unwrap_err();
        assert!(err.contains("do not share one register count"), "{err}");
        let shared = "| kernel | registers |\n|---|---|\n| `flash_attention_bf16_{d64}` | 128 |\n";
        assert_eq!(check("f.md", shared, PTXAS), Ok(1));
        // Saved output without ptxas's register table holds no row to anything.
        assert_eq!(check("g.md", shorthand, "kernel threads\n"), Ok(0));
        let other = "| what | registers (d = 64) |\n|---|---|\n| `S` | 64 |\n";
        assert_eq!(check("d.md", other, PTXAS), Ok(0));
    }
}
