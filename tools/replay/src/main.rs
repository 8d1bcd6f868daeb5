//! `ergon-replay [TRACE.jsonl]`: replays a trace (from the file, or stdin) against
//! the budget it declares and prints one JSON line per charge, then a summary.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::process::ExitCode;

const USAGE: &str = "\
usage: ergon-replay [TRACE.jsonl]   (reads stdin without a file)

Declarations first (any bucket may add \"headroom\":{\"normal\":N,\"bulk\":M}):
  {\"bucket\":\"weight\",\"kind\":\"sliding\",\"limit\":1200,\"window_ms\":60000,\"slots\":60}
  {\"bucket\":\"orders10s\",\"kind\":\"fixed\",\"limit\":50,\"window_ms\":10000,\"phase_ms\":0,\"guard_ms\":20}
  {\"bucket\":\"smooth\",\"kind\":\"token\",\"rate_per_s\":20,\"burst\":40}
  {\"bucket\":\"conc\",\"kind\":\"inflight\",\"limit\":10}
  {\"bucket\":\"ip\",\"kind\":\"gate\"}
Then events in time order, t in integer nanoseconds (class defaults to normal):
  {\"t\":1000,\"charge\":\"r1\",\"class\":\"normal\",\"parts\":{\"weight\":1,\"orders10s\":1,\"ip\":0}}
  {\"t\":2000,\"refund\":\"r1\"}  {\"t\":2000,\"sent\":\"r1\"}  {\"t\":9000,\"complete\":\"r1\"}
  {\"t\":3000,\"throttled\":\"weight\",\"wait_ms\":5000}   (wait_ms optional)
  {\"t\":3000,\"banned\":\"ip\"}  {\"t\":4000,\"clear_halt\":\"ip\"}
  {\"t\":5000,\"observe\":\"weight\",\"used\":900}  {\"t\":5000,\"extra\":\"weight\",\"cost\":40}  {\"t\":6000,\"tick\":true}
Output: {\"id\":\"r1\",\"t\":1000,\"ok\":true} or
  {\"id\":\"r1\",\"t\":1000,\"ok\":false,\"bucket\":\"weight\",\"why\":\"full\",\"ready_at\":1234}
  (why: full | held | halted | too_big; ready_at null when it never comes by itself),
then {\"summary\":{...}}. A bad line stops the replay: exit status 1, its number on stderr.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stdout = io::stdout().lock();
    let result = match args.as_slice() {
        [] => ergon_replay::run(io::stdin().lock(), stdout),
        [flag] if flag == "-h" || flag == "--help" => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [path] => match File::open(path) {
            Ok(file) => ergon_replay::run(BufReader::new(file), stdout),
            Err(e) => {
                eprintln!("ergon-replay: cannot open {path}: {e}");
                return ExitCode::from(2);
            }
        },
        _ => {
            let _ = io::stderr().write_all(USAGE.as_bytes());
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ergon-replay: {e}");
            ExitCode::FAILURE
        }
    }
}
