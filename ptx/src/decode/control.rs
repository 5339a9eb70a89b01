//! Decoding of control flow: branches, `ret`/`exit`, and `call` (the `.param` copies, and the
//! driver's `__assertfail` and `vprintf`).

use super::ir::*;
use super::layout::{ASSERT_FAIL, VPRINTF, callee};
use super::{DResult, Decoder, operand};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    /// Control flow within a function: `bra`, `ret`, `exit`.
    pub(super) fn control(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let op0 = p[0];
        match op0 {
            "bra" => {
                let Operand::Symbol(label) = n(0)? else {
                    return Err("branch without a label".into());
                };
                let target = *self
                    .labels
                    .get(label)
                    .ok_or_else(|| format!("label `{label}` is not in the function"))?;
                Ok((Op::Bra { target }, 0, Class::Branch))
            }
            "ret" => Ok((Op::Ret, 0, Class::Call)),
            "exit" => Ok((Op::Exit, 0, Class::Branch)),
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }

    /// `call{.uni} (r...), f, (a...)`: the arguments and returns are `.param` variables of the
    /// caller, copied to and from the callee's parameters (whose layout `decode` fixed).
    pub(super) fn call(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let ops = &i.operands;
        let callee = callee(self.function, ops)?;
        let at = usize::from(matches!(ops.first(), Some(Operand::Vector(_))));
        let list = |o: Option<&Operand<'static>>| -> DResult<Vec<&'static str>> {
            match o {
                None => Ok(Vec::new()),
                Some(Operand::Vector(items)) => items
                    .iter()
                    .map(|x| match x {
                        Operand::Symbol(n) => Ok(*n),
                        other => Err(format!(
                            "call arguments other than .param variables are not implemented: {other:?}"
                        )),
                    })
                    .collect(),
                Some(other) => Err(format!("expected a list of .param variables, got {other:?}")),
            }
        };
        let rets = list(if at == 1 { ops.first() } else { None })?;
        let args = list(ops.get(at + 1))?;
        if ops.len() > at + 2 {
            return Err("a call with a prototype to a named function is not implemented".into());
        }
        if callee == ASSERT_FAIL {
            return self.assert_fail(&args);
        }
        if callee == VPRINTF {
            return self.printf(&args, &rets);
        }
        let k = self
            .layouts
            .iter()
            .position(|l| l.function.name == callee)
            .expect("reachable laid out every callee");
        let g = &self.layouts[k];
        if args.len() != g.function.params.len() || rets.len() != g.function.returns.len() {
            return Err(format!(
                "`{callee}` takes {} parameters and {} return values, the call passes {} and {}",
                g.function.params.len(),
                g.function.returns.len(),
                args.len(),
                rets.len()
            ));
        }
        let copies = |names: &[&'static str], theirs: &[u32], sizes: Vec<u32>, inward: bool| {
            names
                .iter()
                .zip(theirs)
                .zip(sizes)
                .map(|((name, &their), size)| {
                    let (mine, my_size) = self.pmem_var(name).ok_or_else(|| {
                        format!("`{name}` is not a .param variable of the caller")
                    })?;
                    let bytes = size.min(my_size);
                    Ok(if inward {
                        (mine, their, bytes)
                    } else {
                        (their, mine, bytes)
                    })
                })
                .collect::<DResult<Vec<_>>>()
        };
        let g = &self.layouts[k];
        let (params, returns) = (g.params.clone(), g.returns.clone());
        let param_sizes = g.function.params.iter().map(|p| p.bytes).collect();
        let return_sizes = g.function.returns.iter().map(|p| p.bytes).collect();
        let args = copies(&args, &params, param_sizes, true)?;
        let rets = copies(&rets, &returns, return_sizes, false)?;
        let g = &self.layouts[k];
        let call = Call {
            target: g.code_start,
            regs: (g.reg_base, g.function.registers.len() as u32),
            pmem: g.pmem,
            args,
            rets,
            locals: g.locals.clone(),
            frame: g.frame,
            callee,
        };
        Ok((Op::Call(Box::new(call)), 0, Class::Call))
    }

    /// The parameter-memory offset and size of `name`: a `.param` variable of the current
    /// function's body, or (in a `.func`) one of its parameters or return parameters.
    pub(super) fn pmem_var(&self, name: &str) -> Option<(u32, u32)> {
        let layout = &self.layouts[self.current];
        let f = layout.function;
        if let Some(k) = f.param_vars.iter().position(|v| v.name == name) {
            return Some((
                layout.param_vars[k],
                f.param_vars[k].bytes.unwrap_or(0) as u32,
            ));
        }
        if let Some(k) = f.returns.iter().position(|p| p.name == name) {
            return Some((layout.returns[k], f.returns[k].bytes));
        }
        if f.entry {
            return None;
        }
        let k = f.params.iter().position(|p| p.name == name)?;
        Some((layout.params[k], f.params[k].bytes))
    }

    /// Where `.param` variable `name` of this function lies in its parameter memory, if it holds
    /// at least `bytes`: an argument the call of a driver-supplied function passes.
    pub(super) fn pmem_arg(&self, name: &str, bytes: u32) -> DResult<u32> {
        self.pmem_var(name)
            .filter(|&(_, size)| size >= bytes)
            .map(|(at, _)| at)
            .ok_or_else(|| format!("`{name}` is not a .param variable of {bytes} bytes"))
    }

    /// `call.uni __assertfail, (message, file, line, function, char_size)`: where each argument
    /// lies in this function's parameter memory.
    pub(super) fn assert_fail(&mut self, args: &[&'static str]) -> DResult<(Op, u8, Class)> {
        let [message, file, line, function, _] = args else {
            return Err(format!(
                "`{ASSERT_FAIL}` takes 5 arguments (message, file, line, function, char size), the call passes {}",
                args.len()
            ));
        };
        let offset = |name: &str, bytes: u32| self.pmem_arg(name, bytes);
        let assert = AssertFail {
            message: offset(message, 8)?,
            file: offset(file, 8)?,
            line: offset(line, 4)?,
            function: offset(function, 8)?,
        };
        Ok((Op::AssertFail(Box::new(assert)), 0, Class::Call))
    }

    /// `call.uni (ret), vprintf, (format, args)`: where each argument lies in this function's
    /// parameter memory.
    pub(super) fn printf(
        &mut self,
        args: &[&'static str],
        rets: &[&'static str],
    ) -> DResult<(Op, u8, Class)> {
        let ([format, buffer], [] | [_]) = (args, rets) else {
            return Err(format!(
                "`{VPRINTF}` takes 2 arguments (format, argument buffer) and returns one value, the call passes {} and takes {}",
                args.len(),
                rets.len()
            ));
        };
        let offset = |name: &str, bytes: u32| self.pmem_arg(name, bytes);
        let printf = Printf {
            format: offset(format, 8)?,
            args: offset(buffer, 8)?,
            ret: rets.first().map(|r| offset(r, 4)).transpose()?,
        };
        Ok((Op::Printf(Box::new(printf)), 0, Class::Call))
    }
}
