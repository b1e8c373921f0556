"""Caption metrics with coco-caption's numbers, without Java where possible, and with intervals.

    evaluate      caption_eval / compare_captions: the API behind `vlgap caption-eval`
    io            read and validate predictions and references (coco JSON, JSONL, dicts)
    ptb_tokenize  coco-caption's PTBTokenizer (stanford-corenlp 3.4.1) in pure Python
    bleu, rouge, cider, meteor, sacrebleu_score   the scorers (pycocoevalcap-style compute_score)
    ngrams        vectorised n-gram counting shared by BLEU and CIDEr
    intervals     bootstrap intervals and paired tests over items
"""
