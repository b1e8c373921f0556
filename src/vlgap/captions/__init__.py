"""Caption metrics with coco-caption's numbers, without Java where possible, and with intervals.

    evaluate      caption_eval / compare_captions: the API behind `vlgap caption-eval`
    io            read and validate predictions and references (coco JSON, JSONL, dicts)
    ptb_tokenize  coco-caption's PTBTokenizer (stanford-corenlp 3.4.1) in pure Python
    registry      caption metrics register here (@caption_metric: name, aliases, needs, default);
                  caption_eval and `vlgap caption-eval` discover them
    bleu, rouge, cider, meteor, sacrebleu_score   the scorers (pycocoevalcap-style compute_score), each
                  registering its metric; embedding_eval (CLIPScore, RefCLIPScore, EMScore), bertscore
    ngrams        vectorised n-gram counting shared by BLEU and CIDEr
    intervals     bootstrap intervals and paired tests over items
"""
