"""Hugging Face peft adapters on transformers models (tiny configs, random weights, offline) through
dynview, against eager and TorchDynamo: LoRA (on Llama, on GPT-2's Conv1D layers with fan_in_fan_out,
on BERT for sequence classification with its classifier saved, on T5), DoRA, IA3, LoHa, LoKr, AdaLoRA,
VeRA, OFT, prefix tuning, prompt tuning and P-tuning. peft's code is not transformers': a PeftModel
and a tuner model that forward every missing attribute to the model they wrap (Python __getattr__
chains), LoRA layers that loop over their active adapters by name through ModuleDicts, prompt
encoders whose virtual tokens are concatenated in front of the inputs, past_key_values built from a
prefix encoder. For each: outputs equal eager's on two inputs, a repeat call is a cache hit, and the
graph and break counts equal torch._dynamo.explain's. Switching the active adapter recompiles as
torch.compile does, and a LoRA training step's gradients equal eager's."""
import os
import warnings

import pytest
import torch

import dynview
from counting import counting_backend
from model_outputs import assert_equal_to_eager_on_two_inputs, assert_one_graph_hit_and_counts_as_torch_dynamo

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers", reason="make deps installs transformers")
peft = pytest.importorskip("peft", reason="make deps installs peft")
warnings.filterwarnings("ignore")
pytestmark = [pytest.mark.usefixtures("fresh_engine"), pytest.mark.shared_by_versions]  # (conftest.py)


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg)


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64))


def _bert():
    return transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=3))


def _t5():
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0))


def _ids(seed, n=6):
    return torch.randint(0, 64, (2, n), generator=torch.Generator().manual_seed(seed))


def text(seed):
    return dict(input_ids=_ids(seed), attention_mask=torch.ones(2, 6, dtype=torch.long))


def seq2seq(seed):
    return dict(input_ids=_ids(seed), decoder_input_ids=_ids(seed + 10, 3))


P = peft
QV = ["q_proj", "v_proj"]
# name -> (base model, adapter config, inputs)
ADAPTERS = {
    "lora_llama": (_llama, lambda: P.LoraConfig(r=4, lora_alpha=8, target_modules=QV, init_lora_weights=False), text),
    "lora_gpt2_conv1d": (_gpt2, lambda: P.LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False), text),
    "lora_bert_classifier": (_bert, lambda: P.LoraConfig(task_type=P.TaskType.SEQ_CLS, r=4, target_modules=["query", "value"],
                                                         init_lora_weights=False), text),
    "lora_t5": (_t5, lambda: P.LoraConfig(task_type=P.TaskType.SEQ_2_SEQ_LM, r=4, target_modules=["q", "v"], init_lora_weights=False),
                seq2seq),
    "lora_all_linear_rslora": (_llama, lambda: P.LoraConfig(r=4, target_modules="all-linear", use_rslora=True, init_lora_weights=False),
                               text),
    "ia3": (_llama, lambda: P.IA3Config(target_modules=["k_proj", "v_proj", "down_proj"], feedforward_modules=["down_proj"],
                                        init_ia3_weights=False), text),
    "loha": (_llama, lambda: P.LoHaConfig(r=4, target_modules=QV, init_weights=False), text),
    "lokr": (_llama, lambda: P.LoKrConfig(r=4, target_modules=QV, init_weights=False), text),
    "adalora": (_llama, lambda: P.AdaLoraConfig(r=4, target_modules=QV, total_step=10, init_lora_weights=False), text),
    "vera": (_llama, lambda: P.VeraConfig(r=4, target_modules=QV, init_weights=False), text),
    "oft": (_llama, lambda: P.OFTConfig(r=0, oft_block_size=4, target_modules=QV, init_weights=False), text),
    "prefix_tuning": (_llama, lambda: P.PrefixTuningConfig(task_type=P.TaskType.CAUSAL_LM, num_virtual_tokens=3), text),
    "prompt_tuning": (_llama, lambda: P.PromptTuningConfig(task_type=P.TaskType.CAUSAL_LM, num_virtual_tokens=3), text),
    "p_tuning": (_llama, lambda: P.PromptEncoderConfig(task_type=P.TaskType.CAUSAL_LM, num_virtual_tokens=3, encoder_hidden_size=16),
                 text),
}


def build(name):
    base, config, _ = ADAPTERS[name]
    torch.manual_seed(0)
    return peft.get_peft_model(base(), config()).eval()


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_adapter_equals_eager_hits_the_cache_and_counts_as_torch_dynamo(name):
    assert_one_graph_hit_and_counts_as_torch_dynamo(build(name), ADAPTERS[name][2])


def test_dora_is_one_graph_where_torch_dynamo_breaks_on_its_weight_norm():
    # DoRA's layer takes the norm of its merged weight (lora_B @ lora_A scaled, added to the base
    # weight) each call. TorchDynamo 2.13 breaks inside it (str.startswith on a torch function's
    # name), many times; dynview captures the model in one graph, equal to eager.
    torch.manual_seed(0)
    m = peft.get_peft_model(_llama(), peft.LoraConfig(r=4, target_modules=QV, use_dora=True, init_lora_weights=False)).eval()
    cm = dynview.compile(m, backend="eager")
    with torch.no_grad():
        assert_equal_to_eager_on_two_inputs(cm, m, text)
        ours = dynview.explain(m)(**text(0))
        theirs = torch._dynamo.explain(m)(**text(0))
        torch._dynamo.reset()
    assert (ours.graph_count, len(ours.break_reasons)) == (1, 0), [str(b) for b in ours.break_reasons]
    assert theirs.graph_count > 1 and len(theirs.break_reasons) > 0


def test_switching_the_active_adapter_recompiles_as_torch_compile():
    # Two LoRA adapters on one model; set_adapter between calls changes which of a layer's
    # ModuleDict entries forward reads (a guarded attribute): one compile per adapter, then hits.
    torch.manual_seed(0)
    m = peft.get_peft_model(_llama(), peft.LoraConfig(r=4, target_modules=QV, init_lora_weights=False)).eval()
    m.add_adapter("other", peft.LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False))
    order = ["default", "other", "default", "other"]
    counts = {}
    with torch.no_grad():
        wants = []
        for a in order:
            m.set_adapter(a)
            wants.append(m(**text(0)).logits)
        assert not torch.allclose(wants[0], wants[1])
        for engine, compile_ in (("torch.compile", torch.compile), ("dynview", dynview.compile)):
            torch._dynamo.reset()
            backend, n = counting_backend()
            cm = compile_(m, backend=backend)
            counts[engine] = []
            for a, want in zip(order, wants):
                m.set_adapter(a)
                torch.testing.assert_close(cm(**text(0)).logits, want)
                counts[engine].append(n[0])
        torch._dynamo.reset()
    assert counts["dynview"] == counts["torch.compile"] == [1, 2, 2, 2]


def _step(model, batch):
    out = model(**batch, labels=batch["input_ids"])
    out.loss.backward()
    return out.loss.detach()


def test_a_lora_training_step_gives_eager_gradients():
    # train mode, lora_dropout active: the same random draws in the same order as eager's call
    torch.manual_seed(0)
    cfg = peft.LoraConfig(r=4, target_modules=QV, lora_dropout=0.1, init_lora_weights=False)
    eager_model = peft.get_peft_model(_llama(), cfg).train()
    torch.manual_seed(0)
    model = peft.get_peft_model(_llama(), cfg).train()
    cm = dynview.compile(model, backend="eager")
    for seed in (0, 1):
        torch.manual_seed(seed)
        want = _step(eager_model, text(seed))
        torch.manual_seed(seed)
        got = _step(cm, text(seed))
        torch.testing.assert_close(got, want)
    trained = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    for (n, p), (n2, p2) in zip(model.named_parameters(), eager_model.named_parameters()):
        assert n == n2
        if p.requires_grad:
            torch.testing.assert_close(p.grad, p2.grad, msg=n)
    assert [(r["qualname"], r["break_message"]) for r in dynview._C.take_records() if r["break_id"]] == []
