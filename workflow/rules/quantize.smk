# Stage 2: FP4 quantization with the project's own MXFP4 codec. Writes the checkpoint
# ROCm vLLM loads (quant_method quark), a dequantized copy for backends without FP4
# kernels, and quant_manifest.json (codec, scheme, hashes, logit error). A recipe with
# tool: prequantized instead validates a published quantized checkpoint (a models entry,
# acquired and checksummed) against the model and passes it through; tool: quark runs AMD
# Quark in its own environment (./install.sh --quark), calibrated on the benchmark's dataset.
# A text-to-video benchmark's model is a Diffusers pipeline folder: the native writer quantizes the
# Linears in its transformers' blocks (quant/pipeline.py), with no calibration rows (config
# validation refuses recipes that would need them), and writes a full Diffusers folder of each kind.


rule quantize:
    input:
        model=PATHS["model"],
        prequantized=prequantized_checkpoint,
        calibration=calibration_dataset,
    output:
        quantized=directory(PATHS["quantized"]),
        emulated=directory(PATHS["emulated"]),
    log:
        "logs/quantize/{model}-{recipe}.log",
    # First among the jobs ready with it: every run of the model waits for it, and the light
    # runs of several systems can only pair up on the cores once their models are quantized.
    priority: 50
    container:
        quantize_container
    threads: machine_threads(cluster_cpus=4)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=quantize_mem_mb,
        runtime=lambda wc, attempt: 60 * attempt,
        # The recipe's device (quantization.<recipe>.device; a GPU where its tool needs one):
        # None, not 0, on a CPU (the Kubernetes plugin turns any gpu entry into a GPU request).
        gpu=lambda wc: PLAN.quantize_device(wc.recipe)["gpus"] or None,
        gpu_model=lambda wc: PLAN.quantize_device(wc.recipe)["gpu_model"],
    params:
        container_image=quantize_image,
        recipe=lambda wc: config["quantization"][wc.recipe],
        calibration_file=calibration_file,
    script:
        f"{SCRIPTS}/quantize.py"
