"""What a long-running process of the pipeline shares, whatever its stage:

progress    the progress bar (and throughput) every long loop shows
seeds       one seed per use of a run's seed, derived by hashing (training, arena, self-play)
locks       OS file locks that die with their process; temporary folders owned by one
children    pool workers that die with the process that started them

with progress_bar(total=n, desc="games") as bar: ...   # see each module's docstring
seed = derive_seed(run_seed, "shard", 3)
"""
